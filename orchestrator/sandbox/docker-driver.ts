import Docker from "dockerode";
import { OrchestratorError } from "../errors.ts";
import type { ImageBuild, SandboxDriver, SandboxInfo, SandboxOwner, SandboxSpec } from "./driver.ts";

/** Docker labels that record a sandbox's owner; `docker ps --filter label=dev.svc.session=<id>` finds one. */
const LABELS: Record<keyof SandboxOwner, string> = {
  installationId: "dev.svc.installation",
  sandboxId: "dev.svc.sandbox",
  sessionId: "dev.svc.session",
  projectId: "dev.svc.project",
};

const toLabels = (owner: SandboxOwner) =>
  Object.fromEntries(Object.entries(LABELS).map(([field, label]) => [label, owner[field as keyof SandboxOwner]]));

function toOwner(labels: Record<string, string> | undefined): Partial<SandboxOwner> {
  const owner: Partial<SandboxOwner> = {};
  for (const [field, label] of Object.entries(LABELS)) {
    const value = labels?.[label];
    if (value) owner[field as keyof SandboxOwner] = value;
  }
  return owner;
}

// Enough for git, package managers and dev servers; nothing that reaches the host (no NET_ADMIN, SYS_ADMIN...).
const CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"];

function toInfo(raw: Docker.ContainerInspectInfo, servicePort: number): SandboxInfo {
  const binding = raw.NetworkSettings?.Ports?.[`${servicePort}/tcp`]?.[0];
  return {
    id: raw.Id,
    name: raw.Name.replace(/^\//, ""),
    running: raw.State.Running,
    owner: toOwner(raw.Config.Labels),
    hostPort: binding ? Number(binding.HostPort) : null,
  };
}

/** The engine's failures leave the driver as the orchestrator's own error: nothing above it knows Docker. */
function withOrchestratorErrors(driver: SandboxDriver): SandboxDriver {
  const wrapped: Record<string, unknown> = {};
  for (const [name, call] of Object.entries(driver) as [string, (...args: unknown[]) => Promise<unknown>][]) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await call(...args);
      } catch (err) {
        if (err instanceof OrchestratorError) throw err;
        throw new OrchestratorError(
          "SANDBOX_BACKEND_FAILED",
          `the container engine failed to ${name}: ${(err as Error).message}`,
        );
      }
    };
  }
  return wrapped as SandboxDriver;
}

export function createDockerDriver(options: { docker?: Docker; servicePort: number }): SandboxDriver {
  const docker = options.docker ?? new Docker();
  const port = `${options.servicePort}/tcp`;

  async function inspect(id: string): Promise<SandboxInfo | undefined> {
    try {
      return toInfo(await docker.getContainer(id).inspect(), options.servicePort);
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw err;
    }
  }

  return withOrchestratorErrors({
    async create(spec: SandboxSpec) {
      const container = await docker.createContainer({
        name: spec.name,
        Image: spec.image,
        Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
        Labels: toLabels(spec.owner),
        ExposedPorts: { [port]: {} },
        HostConfig: {
          PortBindings: { [port]: [{ HostIp: "127.0.0.1", HostPort: "" }] },
          ExtraHosts: ["host.docker.internal:host-gateway"],
          Memory: spec.limits.memoryBytes,
          NanoCpus: spec.limits.nanoCpus,
          PidsLimit: spec.limits.pids,
          Privileged: false,
          CapDrop: ["ALL"],
          CapAdd: CAPABILITIES,
          SecurityOpt: ["no-new-privileges"],
          Init: false,
        },
      });
      return container.id;
    },

    async start(id: string) {
      await docker.getContainer(id).start();
      const info = await inspect(id);
      if (!info) throw new Error(`container ${id} vanished after start`);
      return info;
    },

    async stop(id: string) {
      try {
        await docker.getContainer(id).stop({ t: 5 });
      } catch (err) {
        const code = (err as { statusCode?: number }).statusCode;
        if (code !== 304 && code !== 404) throw err;
      }
    },

    async remove(id: string) {
      try {
        await docker.getContainer(id).remove({ force: true, v: true });
      } catch (err) {
        // 404: already gone; 409: another removal of it is under way. Either way it is going.
        const code = (err as { statusCode?: number }).statusCode;
        if (code !== 404 && code !== 409) throw err;
      }
    },

    inspect,

    async listOwned(installationId: string) {
      const list = await docker.listContainers({
        all: true,
        filters: { label: [`${LABELS.installationId}=${installationId}`] },
      });
      return list.map((c) => ({
        id: c.Id,
        name: (c.Names[0] ?? "").replace(/^\//, ""),
        running: c.State === "running",
        owner: toOwner(c.Labels),
        hostPort: c.Ports.find((p) => p.PrivatePort === options.servicePort)?.PublicPort ?? null,
      }));
    },

    async imageExists(tag: string) {
      try {
        await docker.getImage(tag).inspect();
        return true;
      } catch {
        return false;
      }
    },

    async buildImage(build: ImageBuild) {
      const context = "dir" in build.context ? { context: build.context.dir, src: build.context.files } : build.context;
      const stream = await docker.buildImage(context as NodeJS.ReadableStream, {
        t: build.tag,
        buildargs: build.buildArgs ?? {},
        rm: true,
        forcerm: true,
      });
      const lines: string[] = [];
      const failure = await new Promise<string | undefined>((resolve) => {
        docker.modem.followProgress(
          stream,
          (err: Error | null) => resolve(err ? err.message : undefined),
          (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
            if (event.stream) lines.push(event.stream);
            if (event.error) lines.push(`ERROR: ${event.errorDetail?.message ?? event.error}\n`);
          },
        );
      });
      const log = lines.join("");
      const error = failure ?? (log.includes("ERROR: ") ? log.slice(log.lastIndexOf("ERROR: ")) : undefined);
      if (error)
        throw new OrchestratorError("IMAGE_BUILD_FAILED", `image build of ${build.tag} failed: ${error.trim()}`, log);
      return log;
    },
  });
}
