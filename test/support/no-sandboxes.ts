import type { SandboxSettings } from "../../api/app.ts";
import type { SandboxDriver } from "../../orchestrator/sandbox/driver.ts";

/**
 * A driver that runs no sandbox: the API gets its session service, and these tests move sessions through the
 * session store, the port the orchestrator moves them through.
 */
export const noSandboxes = new Proxy({ limitHost: async () => undefined, unlimitHost: async () => {} } as object, {
  get: (target, name) =>
    name in target
      ? target[name as keyof typeof target]
      : name === "then"
        ? undefined
        : async () => {
            throw new Error(`this test runs no sandboxes (${String(name)})`);
          },
}) as SandboxDriver;

/** Sandbox settings for an API over `noSandboxes`. */
export const settings: SandboxSettings = {
  sessionCap: 100,
  sandboxApiOrigin: "http://host.docker.internal:1",
  hostAlias: "host.docker.internal",
  provisionTimeoutMs: 60_000,
  limits: { memoryBytes: 1024 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 512 },
  llm: {},
  defaultAgent: "build",
};
