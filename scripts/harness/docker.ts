import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import type { SandboxSettings } from "../../api/app-options.ts";
import { createDockerDriver } from "../../orchestrator/sandbox/docker-driver.ts";
import { ipv4Gateway } from "../../orchestrator/sandbox/networking.ts";
import { demux } from "../../protocol/docker-streams.ts";

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

/** `linkSocketDir`: the Docker driver's, for an API that listens there too (startApi's option). */
export function orchestratorFor(port: number, overrides: Partial<SandboxSettings> = {}, linkSocketDir?: string) {
  return {
    driver: createDockerDriver({ servicePort: 8000, linkSocketDir }),
    root: ROOT,
    baseImage: BASE_IMAGE,
    settings: {
      sessionCap: 3,
      sandboxApiOrigin: `http://host.docker.internal:${port}`,
      hostAlias: "host.docker.internal",
      sandboxLink: "dial-out",
      provisionTimeoutMs: 90_000,
      limits: { memoryBytes: 1024 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 512 },
      llm: {},
      defaultAgent: "build",
      ...overrides,
    } satisfies SandboxSettings,
  };
}

/**
 * Removes every container a test's project left, whatever state it is in, and then their installations' networks;
 * `installationId` names the stack's own installation, whose network goes even when no container of it was left.
 */
export async function removeProjectContainers(
  docker: Docker,
  projectId: string | undefined,
  installationId?: string,
): Promise<void> {
  if (!projectId) return;
  const installations = new Set<string>(installationId ? [installationId] : []);
  for (const c of await docker.listContainers({ all: true, filters: { label: [`dev.svc.project=${projectId}`] } })) {
    const installation = c.Labels?.["dev.svc.installation"];
    if (installation) installations.add(installation);
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => {});
  }
  for (const installation of installations) await removeInstallationNetworks(docker, installation);
}

/**
 * The sandbox network the Docker driver made for a test's installation, once none of its containers is left: every
 * test database is a new installation, and the engine's address pools hold only ~30 bridge networks.
 */
export async function removeInstallationNetworks(docker: Docker, installation: string): Promise<void> {
  const label = `dev.svc.installation=${installation}`;
  if ((await docker.listContainers({ all: true, filters: { label: [label] } })).length > 0) return;
  for (const n of await docker.listNetworks({ filters: { label: [label] } })) {
    await docker
      .getNetwork(n.Id)
      .remove()
      .catch(() => {});
  }
}

/** This host's address on the engine's default bridge: host.docker.internal of a container there. */
export async function bridgeGateway(docker: Docker): Promise<string> {
  const bridge = ipv4Gateway(await docker.getNetwork("bridge").inspect());
  if (!bridge) throw new Error("the engine's bridge network has no IPv4 subnet");
  return bridge.hostAddress;
}

/** The env a sandbox container was created with, as a map. */
export async function containerEnv(docker: Docker, containerId: string): Promise<Record<string, string>> {
  const env = (await docker.getContainer(containerId).inspect()).Config.Env;
  return Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}

/** Runs a command in a container (as `docker exec` would) and returns its exit code and combined output. */
export async function execIn(
  docker: Docker,
  containerId: string,
  cmd: string[],
  options: { env?: string[]; workingDir?: string } = {},
): Promise<{ code: number; out: string }> {
  const execution = await docker.getContainer(containerId).exec({
    Cmd: cmd,
    AttachStdout: true,
    AttachStderr: true,
    Env: options.env ?? [],
    WorkingDir: options.workingDir ?? "/workspace",
  });
  const stream = await execution.start({});
  const chunks: Buffer[] = [];
  for await (const chunk of demux(stream)) chunks.push(chunk.data);
  const { ExitCode } = await execution.inspect();
  const out = Buffer.concat(chunks).toString();
  return { code: ExitCode ?? -1, out };
}

/** Starts a command in a container in the background (`docker exec -d`). */
export async function execDetached(docker: Docker, containerId: string, cmd: string[]): Promise<void> {
  const execution = await docker.getContainer(containerId).exec({ Cmd: cmd, WorkingDir: "/workspace" });
  await execution.start({ Detach: true });
}
