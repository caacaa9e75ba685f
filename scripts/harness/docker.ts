import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import type { SandboxSettings } from "../../api/app.ts";
import { createDockerDriver } from "../../orchestrator/sandbox/docker-driver.ts";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const BASE_IMAGE = process.env.SVC_SANDBOX_BASE_IMAGE ?? "svc-debian:bookworm";

/** The real engine: a missing Docker fails the suite (scripts/setup.sh docker starts it), it never skips. */
export async function requireDocker(): Promise<Docker> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (err) {
    throw new Error(`Docker is required (run scripts/setup.sh docker): ${(err as Error).message}`);
  }
  try {
    await docker.getImage(BASE_IMAGE).inspect();
  } catch {
    execFileSync("bash", [`${ROOT}scripts/images/base-image.sh`, BASE_IMAGE], { stdio: "inherit" });
  }
  return docker;
}

export function orchestratorFor(port: number, overrides: Partial<SandboxSettings> = {}) {
  return {
    driver: createDockerDriver({ servicePort: 8000 }),
    root: ROOT,
    baseImage: BASE_IMAGE,
    settings: {
      sessionCap: 3,
      sandboxApiOrigin: `http://host.docker.internal:${port}`,
      hostAlias: "host.docker.internal",
      provisionTimeoutMs: 90_000,
      limits: { memoryBytes: 1024 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 512 },
      llm: {},
      defaultAgent: "build",
      ...overrides,
    } satisfies SandboxSettings,
  };
}

/** Removes every container a test's project left, whatever state it is in. */
export async function removeProjectContainers(docker: Docker, projectId: string | undefined): Promise<void> {
  if (!projectId) return;
  for (const c of await docker.listContainers({ all: true, filters: { label: [`dev.svc.project=${projectId}`] } })) {
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => {});
  }
}

/** The env a sandbox container was created with, as a map. */
export async function containerEnv(docker: Docker, containerId: string): Promise<Record<string, string>> {
  const env = (await docker.getContainer(containerId).inspect()).Config.Env;
  return Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}
