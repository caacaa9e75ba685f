import type { Duplex } from "node:stream";
import Docker from "dockerode";
import { plainText } from "../../protocol/terminal-text.ts";
import { OrchestratorError } from "../errors.ts";
import { buildFailure, STEP } from "./build-failure.ts";
import { demux, linesOf } from "./docker-streams.ts";
import type {
  ExecSpec,
  ImageBuild,
  SandboxDriver,
  SandboxExec,
  SandboxInfo,
  SandboxNetwork,
  SandboxOwner,
  SandboxSpec,
} from "./driver.ts";

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

/** Marks the networks this driver creates (with the installation's label beside it). */
export const NETWORK_LABEL = "dev.svc.network";

/**
 * The bridge every sandbox of an installation joins. No inter-container traffic: the engine drops packets between
 * two containers of this bridge (iptables), so a sandbox reaches the host (host.docker.internal, the gateway) and
 * the internet, never another sandbox's ports. Ports published without an address bind the host's loopback.
 * One network per installation rather than per sandbox: the engine's default address pools hold only ~30 bridges.
 */
const NETWORK_OPTIONS = {
  "com.docker.network.bridge.enable_icc": "false",
  "com.docker.network.bridge.host_binding_ipv4": "127.0.0.1",
};

export const sandboxNetworkName = (installation: string) => `svc-sandboxes-${installation}`;

const statusOf = (err: unknown) => (err as { statusCode?: number }).statusCode;

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

export function createDockerDriver(options: {
  docker?: Docker;
  servicePort: number;
  /** Awaited each time a network is found or made, before a sandbox joins it: the API listens on its host
   * address (which may change when the network is made again after a prune). */
  onNetwork?: (network: SandboxNetwork) => Promise<void>;
}): SandboxDriver {
  const docker = options.docker ?? new Docker();
  const port = `${options.servicePort}/tcp`;

  // One lookup or creation per network and process; a failure is forgotten so the next sandbox tries again.
  const networks = new Map<string, Promise<SandboxNetwork & { id: string }>>();

  /** The network of that name (by id): the oldest when a race left several, so every process picks the same. */
  async function findNetwork(name: string): Promise<string | undefined> {
    // The engine's name filter matches substrings.
    const found = (await docker.listNetworks({ filters: { name: [name] } })).filter((n) => n.Name === name);
    found.sort((a, b) => Date.parse(a.Created) - Date.parse(b.Created) || a.Id.localeCompare(b.Id));
    return found[0]?.Id;
  }

  async function createNetwork(name: string, installation: string): Promise<string> {
    const existing = await findNetwork(name);
    if (existing) return existing;
    let created: string | undefined;
    try {
      const network = await docker.createNetwork({
        Name: name,
        Driver: "bridge",
        CheckDuplicate: true,
        Options: NETWORK_OPTIONS,
        Labels: { [NETWORK_LABEL]: "sandboxes", [LABELS.installationId]: installation },
      });
      created = network.id;
    } catch (err) {
      // 409: another process created it meanwhile.
      if (statusOf(err) !== 409) throw err;
    }
    // The engine's duplicate check is not atomic: two creates can both succeed. Everyone keeps the oldest, and
    // the loser removes its own (still empty) copy.
    const chosen = await findNetwork(name);
    if (!chosen) throw new Error(`the sandbox network ${name} vanished as it was created`);
    if (created && created !== chosen) {
      await docker
        .getNetwork(created)
        .remove()
        .catch(() => {});
    }
    return chosen;
  }

  /** The network's id and the host's address on it (its gateway), which sandboxes know as host.docker.internal. */
  async function describeNetwork(id: string): Promise<SandboxNetwork & { id: string }> {
    const configs: { Gateway?: string; Subnet?: string }[] = (await docker.getNetwork(id).inspect()).IPAM?.Config ?? [];
    const ipv4 = configs.find((c) => c.Gateway && c.Subnet && !c.Subnet.includes(":"));
    if (!ipv4?.Gateway || !ipv4.Subnet) throw new Error(`the sandbox network ${id} has no IPv4 gateway`);
    return { id, hostAddress: ipv4.Gateway, subnet: ipv4.Subnet };
  }

  function ensureNetwork(installation: string): Promise<SandboxNetwork & { id: string }> {
    const name = sandboxNetworkName(installation);
    let pending = networks.get(name);
    if (!pending) {
      pending = createNetwork(name, installation)
        .then(describeNetwork)
        .then(async (network) => {
          await options.onNetwork?.(network);
          return network;
        });
      networks.set(name, pending);
      pending.catch(() => networks.delete(name));
    }
    return pending;
  }

  async function inspect(id: string): Promise<SandboxInfo | undefined> {
    try {
      return toInfo(await docker.getContainer(id).inspect(), options.servicePort);
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  return withOrchestratorErrors({
    async create(spec: SandboxSpec) {
      const installation = spec.owner.installationId;
      const createOn = (network: SandboxNetwork & { id: string }) =>
        docker.createContainer({
          name: spec.name,
          Image: spec.image,
          Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
          Labels: toLabels(spec.owner),
          ExposedPorts: { [port]: {} },
          HostConfig: {
            NetworkMode: network.id,
            PortBindings: { [port]: [{ HostIp: "127.0.0.1", HostPort: "" }] },
            // The host as this network sees it, not the default bridge's gateway: the API listens there even when
            // it listens on loopback only otherwise.
            ExtraHosts: [`host.docker.internal:${network.hostAddress}`],
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
      try {
        return (await createOn(await ensureNetwork(installation))).id;
      } catch (err) {
        // The network was removed behind this process's back (`docker network prune`): make it again, once.
        if (statusOf(err) !== 404 || !/network/i.test((err as Error).message)) throw err;
        networks.delete(sandboxNetworkName(installation));
        return (await createOn(await ensureNetwork(installation))).id;
      }
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
        const code = statusOf(err);
        if (code !== 304 && code !== 404) throw err;
      }
    },

    async remove(id: string) {
      try {
        await docker.getContainer(id).remove({ force: true, v: true });
      } catch (err) {
        // 404: already gone; 409: another removal of it is under way. Either way it is going.
        const code = statusOf(err);
        if (code !== 404 && code !== 409) throw err;
      }
    },

    inspect,

    async network(installationId: string) {
      const id = await findNetwork(sandboxNetworkName(installationId));
      if (!id) return undefined;
      const { hostAddress, subnet } = await describeNetwork(id);
      return { hostAddress, subnet };
    },

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

    async buildImage(build: ImageBuild, onStep?: (step: string) => void) {
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
            if (event.stream) {
              lines.push(event.stream);
              for (const line of plainText(event.stream).split("\n")) {
                const step = STEP.exec(line.trim());
                if (step) onStep?.(`${step[1]} ${step[2]}`);
              }
            }
            if (event.error) lines.push(`ERROR: ${event.errorDetail?.message ?? event.error}\n`);
          },
        );
      });
      // Colours and cursor moves of the build's commands would reach browsers and pipes through a session's error.
      const log = plainText(lines.join(""));
      const error = failure ?? (log.includes("ERROR: ") ? log.slice(log.lastIndexOf("ERROR: ")) : undefined);
      if (error) throw buildFailure(build.tag, log, plainText(error).trim());
      return log;
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
  });
}
