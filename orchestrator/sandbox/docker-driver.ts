import { type Duplex, PassThrough } from "node:stream";
import Docker from "dockerode";
import { demux, linesOf } from "../../protocol/docker-streams.ts";
import {
  SANDBOX_LINK_ENV,
  SANDBOX_LINK_SOCKET_ENV,
  SANDBOX_LINK_SOCKET_MOUNT,
  SANDBOX_LINK_SOCKET_NAME,
} from "../../protocol/sandbox-link.ts";
import { buildFences, runBuild } from "./docker-build.ts";
import type {
  AppContainerSpec,
  ContainerInfo,
  ExecSpec,
  ImageBuild,
  NetworkOwner,
  SandboxDriver,
  SandboxEgress,
  SandboxExec,
  SandboxLimits,
  SandboxSpec,
} from "./driver.ts";
import { withOrchestratorErrors } from "./engine-errors.ts";
import { type ContainerAddresses, type SandboxNetworking, type SandboxPlacement, statusOf } from "./networking.ts";
import { APP_LABELS, OWNER_LABELS, POOL_LABEL, toAppLabels, toAppOwner, toLabels, toOwner } from "./owner-labels.ts";
import { sharedNetworking } from "./shared-network.ts";

// Enough for git, package managers and dev servers; nothing that reaches the host (no NET_ADMIN, SYS_ADMIN...).
const CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"];

/** The port the API reaches a container on, recorded at its creation. */
const PORT_LABEL = "dev.svc.port";

/** At most 3 files of 10 MB of a container's output on the engine's disk, whatever the agent or app prints. */
const LOG_CONFIG: Docker.HostConfig["LogConfig"] = {
  Type: "json-file",
  Config: { "max-size": "10m", "max-file": "3" },
};

/**
 * CPU shares (the engine's default 1,024): a pooled sandbox boots at Docker's least weight until a session claims it.
 * Measured here: a sandbox starting beside two such boots took 0.95-1.10 s, as on an idle host, and 1.52-1.54 s
 * beside two at the default weight.
 */
const POOLED_CPU_SHARES = 2;
const CPU_SHARES = 1024;

/** Resource limits and hardening shared by sandboxes and apps. */
function hostConfig(placement: SandboxPlacement, limits: SandboxLimits): Docker.HostConfig {
  return {
    NetworkMode: placement.networkId,
    ExtraHosts: [`host.docker.internal:${placement.hostAddress}`],
    Memory: limits.memoryBytes,
    NanoCpus: limits.nanoCpus,
    PidsLimit: limits.pids,
    Privileged: false,
    CapDrop: ["ALL"],
    CapAdd: CAPABILITIES,
    SecurityOpt: ["no-new-privileges"],
    Init: false,
    LogConfig: LOG_CONFIG,
  };
}

function addressesOf(c: Docker.ContainerInspectInfo | Docker.ContainerInfo): ContainerAddresses {
  const networks: Record<string, { IPAddress: string }> = c.NetworkSettings?.Networks ?? {};
  return { networks: Object.fromEntries(Object.entries(networks).map(([name, n]) => [name, n.IPAddress])) };
}

export function createDockerDriver(options: {
  docker?: Docker;
  servicePort: number;
  /** How sandboxes meet the API: one shared bridge by default (an API on the host). */
  networking?: SandboxNetworking;
  /**
   * A directory on the engine's host holding the API's link socket (api/http/sandbox-socket.ts): mounted read-only
   * into each sandbox that dials a link, whose daemon then dials through it (SANDBOX_LINK_SOCKET_ENV).
   */
  linkSocketDir?: string;
}): SandboxDriver {
  const docker = options.docker ?? new Docker();
  const port = `${options.servicePort}/tcp`;
  const networking = options.networking ?? sharedNetworking({ docker });

  /** An app's container carries its deploy's label; any other is taken for a sandbox, owner or not. */
  const toInfo = (
    id: string,
    name: string,
    running: boolean,
    labels: Record<string, string> | undefined,
    addresses: ContainerAddresses,
  ): ContainerInfo => {
    if (labels?.[APP_LABELS.deployId]) {
      const appPort = Number(labels[PORT_LABEL]);
      return {
        kind: "app",
        id,
        running,
        owner: toAppOwner(labels),
        endpoint: running && appPort ? networking.endpoint(addresses, appPort) : null,
      };
    }
    return {
      kind: "sandbox",
      id,
      name: name.replace(/^\//, ""),
      running,
      owner: toOwner(labels),
      endpoint: running ? networking.endpoint(addresses, options.servicePort) : null,
      pool: labels?.[POOL_LABEL] ?? null,
    };
  };

  /** Creates on the container's network; a network pruned behind this process's back is made again, once. */
  async function createContainer(
    owner: NetworkOwner,
    reachedOn: number,
    describe: (placement: SandboxPlacement) => Docker.ContainerCreateOptions,
    egress: SandboxEgress = "open",
  ): Promise<string> {
    const createOn = (placement: SandboxPlacement) => {
      const spec = describe(placement);
      return docker.createContainer({ ...spec, Labels: { ...spec.Labels, [PORT_LABEL]: String(reachedOn) } });
    };
    try {
      return (await createOn(await networking.place(owner, egress))).id;
    } catch (err) {
      if (statusOf(err) !== 404 || !/network/i.test((err as Error).message)) {
        await networking.release(owner.sandboxId).catch(() => {});
        throw err;
      }
      networking.forget(owner);
      return (await createOn(await networking.place(owner, egress))).id;
    }
  }

  /** The build's fences, on a network that exists: a build names it by id, and one pruned meanwhile is made again. */
  async function fencesFor(sandbox: NonNullable<ImageBuild["sandbox"]>) {
    const placement = await networking.place(sandbox.owner);
    const exists = await docker
      .getNetwork(placement.networkId)
      .inspect()
      .then(
        () => true,
        (err) => {
          if (statusOf(err) !== 404) throw err;
          return false;
        },
      );
    if (exists) return buildFences(placement, sandbox.limits);
    networking.forget(sandbox.owner);
    return buildFences(await networking.place(sandbox.owner), sandbox.limits);
  }

  function createSandbox(spec: SandboxSpec): Promise<string> {
    const socket = options.linkSocketDir && spec.env[SANDBOX_LINK_ENV] ? options.linkSocketDir : undefined;
    const env = socket
      ? { ...spec.env, [SANDBOX_LINK_SOCKET_ENV]: `${SANDBOX_LINK_SOCKET_MOUNT}/${SANDBOX_LINK_SOCKET_NAME}` }
      : spec.env;
    return createContainer(
      spec.owner,
      options.servicePort,
      (placement) => ({
        name: spec.name,
        Image: spec.image,
        Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        Labels: { ...toLabels(spec.owner), ...(spec.pool ? { [POOL_LABEL]: spec.pool } : {}) },
        ExposedPorts: { [port]: {} },
        HostConfig: {
          ...hostConfig(placement, spec.limits),
          CpuShares: spec.pool ? POOLED_CPU_SHARES : CPU_SHARES,
          ...(socket ? { Binds: [`${socket}:${SANDBOX_LINK_SOCKET_MOUNT}:ro`] } : {}),
        },
      }),
      spec.egress,
    );
  }

  function createApp(spec: AppContainerSpec): Promise<string> {
    const network = { installationId: spec.owner.installationId, sandboxId: spec.owner.deployId };
    return createContainer(network, spec.port, (placement) => ({
      name: spec.name,
      Image: spec.image,
      Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
      Labels: toAppLabels(spec.owner),
      ExposedPorts: { [`${spec.port}/tcp`]: {} },
      ...(spec.command ? { Entrypoint: ["sh", "-c"], Cmd: [spec.command] } : {}),
      HostConfig: hostConfig(placement, spec.limits),
    }));
  }

  async function inspect(id: string): Promise<ContainerInfo | undefined> {
    try {
      const raw = await docker.getContainer(id).inspect();
      return toInfo(raw.Id, raw.Name, raw.State.Running, raw.Config.Labels, addressesOf(raw));
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  return withOrchestratorErrors<SandboxDriver>(
    {
      create: (spec: SandboxSpec | AppContainerSpec) => ("servicePort" in spec ? createSandbox(spec) : createApp(spec)),

      async start(id: string) {
        await docker.getContainer(id).start();
        const info = await inspect(id);
        if (!info) throw new Error(`container ${id} vanished after start`);
        return info;
      },

      async booted(id: string) {
        await docker.getContainer(id).update({ CpuShares: CPU_SHARES });
      },

      async remove(id: string) {
        const labels = await docker
          .getContainer(id)
          .inspect()
          .then((raw) => raw.Config.Labels ?? {})
          .catch(() => ({}) as Record<string, string>);
        // Its own network, in the layouts that give one: keyed by the sandbox, or by the app's deploy.
        const networkKey = labels[OWNER_LABELS.sandboxId] ?? labels[APP_LABELS.deployId];
        try {
          await docker.getContainer(id).remove({ force: true, v: true });
        } catch (err) {
          // 404: already gone; 409: another removal of it is under way. Either way it is going.
          const code = statusOf(err);
          if (code !== 404 && code !== 409) throw err;
        }
        await networking.release(networkKey);
      },

      inspect,

      async list(installationId: string) {
        const list = await docker.listContainers({
          all: true,
          filters: { label: [`${OWNER_LABELS.installationId}=${installationId}`] },
        });
        // Only what this driver made, by its sandbox's or deploy's label: a container someone else gave the
        // installation's label is no caller's to remove.
        return list
          .filter((c) => c.Labels[OWNER_LABELS.sandboxId] || c.Labels[APP_LABELS.deployId])
          .map((c) => toInfo(c.Id, c.Names[0] ?? "", c.State === "running", c.Labels, addressesOf(c)));
      },

      async diskUsage(installationId: string) {
        // One listing measures every sandbox (the engine walks each writable layer): cheaper than one inspect each.
        const list = await docker.listContainers({
          size: true,
          filters: { label: [`${OWNER_LABELS.installationId}=${installationId}`, OWNER_LABELS.sandboxId] },
        });
        // The typings omit SizeRw, which the engine leaves out when nothing was written.
        return (list as (Docker.ContainerInfo & { SizeRw?: number })[]).map((c) => ({
          sandboxId: c.Labels[OWNER_LABELS.sandboxId]!,
          bytes: c.SizeRw ?? 0,
        }));
      },

      async logs(id, options) {
        const container = docker.getContainer(id);
        const wanted = { stdout: true, stderr: true, tail: options.tail };
        if (!options.follow) {
          return linesOf(demux([await container.logs({ ...wanted, follow: false })]));
        }
        const stream = (await container.logs({ ...wanted, follow: true })) as NodeJS.ReadableStream & Duplex;
        options.signal.addEventListener("abort", () => stream.destroy(), { once: true });
        return linesOf(demux(stream));
      },

      async exec(id, spec: ExecSpec): Promise<SandboxExec> {
        // No user given: the command runs as the image's user, the one the daemon and the agent run as.
        const execution = await docker.getContainer(id).exec({
          Cmd: spec.cmd,
          AttachStdin: spec.stdin,
          AttachStdout: true,
          AttachStderr: true,
          Tty: spec.tty,
          WorkingDir: spec.workingDir,
          Env: spec.env,
        });
        const socket = (await execution.start({ hijack: true, stdin: spec.stdin, Tty: spec.tty })) as Duplex;
        const resize = async (cols: number, rows: number) => {
          await execution.resize({ w: cols, h: rows });
        };
        if (spec.tty && spec.cols && spec.rows) await resize(spec.cols, spec.rows).catch(() => {});
        const source = socket as AsyncIterable<Buffer>;
        return {
          stdin: spec.stdin ? socket : null,
          output: spec.tty
            ? (async function* () {
                for await (const data of source) yield { stream: "stdout" as const, data };
              })()
            : demux(source),
          resize,
          async exitCode() {
            // The engine records the exit a moment after the output ends.
            for (let i = 0; i < 100; i++) {
              const state = await execution.inspect();
              if (!state.Running) return state.ExitCode ?? -1;
              await new Promise((r) => setTimeout(r, 20));
            }
            return -1;
          },
          close: () => socket.destroy(),
        };
      },

      async environment(id) {
        const env = (await docker.getContainer(id).inspect()).Config.Env ?? [];
        return Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
      },

      async imageExists(tag: string) {
        try {
          await docker.getImage(tag).inspect();
          return true;
        } catch {
          return false;
        }
      },

      async buildImage(build: ImageBuild, onStep?: (step: string) => void) {
        // Read from now on, before the fences' network is looked up: a child process's output (git archive) that is
        // not being read when the process exits is thrown away.
        const context =
          "dir" in build.context
            ? { context: build.context.dir, src: build.context.files }
            : build.context.pipe(new PassThrough());
        if (!build.sandbox) return runBuild(docker, build, context, {}, onStep);
        try {
          return await runBuild(docker, build, context, await fencesFor(build.sandbox), onStep);
        } catch (err) {
          // The attached layout made the sandbox's own network for this build, for the sandbox to join next under the
          // same id: no sandbox follows a failed build to use or remove it.
          await networking.release(build.sandbox.owner.sandboxId).catch(() => {});
          throw err;
        }
      },

      networks: (installationId: string) => networking.sharedNetworks(installationId),
      limitHost: (access) => networking.limitHost(access),
      unlimitHost: (access) => networking.unlimitHost(access),
      unlistedEgress: async () => "open",
    },
    "the container engine",
  );
}
