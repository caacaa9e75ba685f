import type { SandboxSettings } from "../../api/app-options.ts";
import type { SandboxDriver } from "../../orchestrator/sandbox/driver.ts";
import { call, seedUser, startApi } from "./api-server.ts";
import { type DatabaseKind, freshDatabase } from "./databases.ts";

/**
 * A driver whose host verbs answer at once (no firewall to install, open egress) and whose every sandbox verb is
 * `sandboxVerb`'s: it fails, stalls or records, as the test needs.
 */
export function hostOnlyDriver(sandboxVerb: (name: string, args: unknown[]) => Promise<unknown>): SandboxDriver {
  const host: Partial<SandboxDriver> = {
    limitHost: async () => undefined,
    unlimitHost: async () => {},
    unlistedEgress: async () => "open",
  };
  return new Proxy(host, {
    get: (target, name) =>
      name in target
        ? target[name as keyof typeof target]
        : name === "then"
          ? undefined
          : (...args: unknown[]) => sandboxVerb(String(name), args),
  }) as SandboxDriver;
}

/**
 * A driver that runs no sandbox: the API gets its session service, and these tests move sessions through the
 * session store, the port the orchestrator moves them through.
 */
export const noSandboxes = hostOnlyDriver(async (name) => {
  throw new Error(`this test runs no sandboxes (${name})`);
});

/** Sandbox settings for an API over `noSandboxes`. */
export const settings: SandboxSettings = {
  sessionCap: 100,
  sandboxApiOrigin: "http://host.docker.internal:1",
  hostAlias: "host.docker.internal",
  sandboxLink: "dial-out",
  provisionTimeoutMs: 60_000,
  limits: { memoryBytes: 1024 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 512 },
  llm: {},
  defaultAgent: "build",
};

/** An API over `noSandboxes` on a fresh database, with two accounts (Alice, Bob) and a project each. */
export async function twoAccountApi(kind: DatabaseKind) {
  const db = await freshDatabase(kind);
  const api = await startApi(db.sql, {
    orchestrator: { driver: noSandboxes, settings, root: process.cwd(), baseImage: "none" },
  });
  const alice = await seedUser(api.services, "alice");
  const bob = await seedUser(api.services, "bob");
  const project = async (user: typeof alice, name: string) =>
    (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name } })).body.id as string;
  return {
    db,
    api,
    alice,
    bob,
    aliceProject: await project(alice, "A"),
    bobProject: await project(bob, "B"),
    async close() {
      await api.close();
      await db.drop();
    },
  };
}
export type TwoAccountApi = Awaited<ReturnType<typeof twoAccountApi>>;
