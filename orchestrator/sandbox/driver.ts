import type { SandboxLogLine } from "../../protocol/sandbox-access.ts";

/**
 * What the orchestrator needs from a sandbox backend: the few verbs every engine can provide, so that another
 * (Docker Swarm, Kubernetes) implements the same ones. Docker implements them now (docker-driver.ts). Failures reject
 * with an OrchestratorError (errors.ts), never with the backend's own error type.
 *
 * Isolation is the driver's business and every driver provides it: a sandbox reaches the host (the API and the
 * model gateway, by the host alias) and the outside world, never another sandbox's ports; its service port is
 * reachable from the API only; with `limitHost`, no other port of the host; with `proxy` egress, nothing outside
 * but through the API. Docker: see networking.ts; Kubernetes: a NetworkPolicy.
 */

/**
 * How a sandbox reaches the outside world: `open` directly; `proxy` only through the API's egress proxy (the
 * project's `[sandbox] egress` list decides there), its network having no route out.
 */
export type SandboxEgress = "open" | "proxy";

/** What the installation's sandboxes may reach of the host they run on. */
export type HostAccess = {
  installationId: string;
  /** Who asks (an API process, by the port it serves on): several may share an installation, each keeps its own
   * ports open until it releases them. */
  holder: string;
  /** TCP ports of the host sandboxes reach (the API's, a model gateway's on the host); every other is closed. */
  ports: number[];
};

/** Whether the host's other ports are closed to sandboxes; when not, why. */
export type HostAccessState = { enforced: true } | { enforced: false; reason: string };

/** Whose a sandbox is: the backend records it on the sandbox (Docker labels) and reports it back in listings. */
export type SandboxOwner = {
  /** The installation (one per database): the reconciler never touches another stack's sandboxes, and a driver
   * groups an installation's sandboxes (Docker: on one network). */
  installationId: string;
  sandboxId: string;
  sessionId: string;
  projectId: string;
};

/** Whose an app container is: the installation and project, the app's name and the deploy that made it. */
export type AppOwner = { installationId: string; projectId: string; app: string; deployId: string };

/** Where a container's network is keyed, in the layouts that give each container its own: a sandbox or a deploy. */
export type NetworkOwner = { installationId: string; sandboxId: string };

/** A long-running app's container: as isolated as a sandbox, its `port` reachable by the API only. */
export type AppContainerSpec = {
  name: string;
  image: string;
  env: Record<string, string>;
  /** Run by `sh -c` instead of the image's entrypoint and CMD; absent: the image's own. */
  command?: string;
  port: number;
  owner: AppOwner;
  limits: SandboxLimits;
};

export type AppContainerInfo = {
  kind: "app";
  id: string;
  running: boolean;
  owner: Partial<AppOwner>;
  /** The app's URL as the API reaches it, once running. */
  endpoint: string | null;
};

/** What one sandbox or app container may use of the host (SVC_SANDBOX_MEMORY_MB and the like). */
export type SandboxLimits = { memoryBytes: number; nanoCpus: number; pids: number };

export type SandboxSpec = {
  name: string;
  image: string;
  env: Record<string, string>;
  owner: SandboxOwner;
  /** The daemon's port inside the sandbox; reachable by the API only. */
  servicePort: number;
  limits: SandboxLimits;
  /**
   * A warm-pool sandbox: the API process (cluster instance) whose pool holds it until a session claims it. Its boot is
   * work done ahead of demand, so it runs at the least CPU weight the engine has (Docker: 2 shares of 1,024) until
   * `booted`: where the host is busy, sessions starting now and running sandboxes go first, and it boots on what
   * they leave.
   */
  pool?: string;
  /** Default `open`. */
  egress?: SandboxEgress;
};

export type SandboxInfo = {
  kind: "sandbox";
  id: string;
  name: string;
  running: boolean;
  /** Empty fields when the backend holds a sandbox it did not record an owner for. */
  owner: Partial<SandboxOwner>;
  /** The daemon's URL as the API reaches it, once running. */
  endpoint: string | null;
  /** SandboxSpec.pool of a warm-pool sandbox. */
  pool: string | null;
};

export type ContainerInfo = SandboxInfo | AppContainerInfo;

/** Bytes a running sandbox has written beyond its image. */
export type SandboxDiskUsage = { sandboxId: string; bytes: number };

export type ImageBuild = {
  tag: string;
  /** A tar stream of the build context, or a directory and the files in it. */
  context: NodeJS.ReadableStream | { dir: string; files: string[] };
  buildArgs?: Record<string, string>;
  /** The Dockerfile's path inside the context; default `Dockerfile`. */
  dockerfile?: string;
  /**
   * A build of a project's own Dockerfile: its steps run fenced as the sandbox that will run the image is (its
   * limits, its network and host alias), never on the engine's default network unbounded.
   */
  sandbox?: { owner: NetworkOwner; limits: SandboxLimits };
};

/** Where sandboxes meet the host: the host's own address on the sandboxes' network, and that network. */
export type SandboxNetwork = { hostAddress: string; subnet: string };

/** One line of a sandbox's output (its PID 1's: entrypoint, daemon, agent), without its newline. */
export type { SandboxLogLine };

export type ExecSpec = {
  cmd: string[];
  /** A pseudo-terminal: output is all stdout, and the terminal can be resized. */
  tty: boolean;
  /** Attach the command's stdin. */
  stdin: boolean;
  workingDir: string;
  env: string[];
  cols?: number;
  rows?: number;
};

/** A command running in a sandbox, as the sandbox's own user. */
export type SandboxExec = {
  /** The command's stdin when attached; ending it closes the command's stdin. */
  stdin: NodeJS.WritableStream | null;
  /** The command's output as it comes; ends when the command does. */
  output: AsyncIterable<{ stream: "stdout" | "stderr"; data: Buffer }>;
  resize(cols: number, rows: number): Promise<void>;
  /** Its exit code, once `output` has ended. */
  exitCode(): Promise<number>;
  /** Stops following the command (for a tty, the terminal hangs up). */
  close(): void;
};

/**
 * Containers: to an engine a sandbox and an app's container are one kind of thing (placed, limited and fenced
 * alike), so one set of verbs serves both; a spec's `servicePort` and an info's `kind` tell them apart.
 */
export type ContainerVerbs = {
  create(spec: SandboxSpec | AppContainerSpec): Promise<string>;
  start(id: string): Promise<ContainerInfo>;
  /**
   * A pooled sandbox's boot is over: from now on it weighs what any sandbox does (see SandboxSpec.pool). Ready, it
   * asks for little CPU, but what it asks for (its health checks, its claim) must not wait behind a saturated host.
   */
  booted(id: string): Promise<void>;
  remove(id: string): Promise<void>;
  inspect(id: string): Promise<ContainerInfo | undefined>;
  /** Every container of one installation, sandboxes and apps, running or not: each caller keeps the kind it owns
   * (the reconciler must never remove an app's container, nor the app deployer a sandbox). */
  list(installationId: string): Promise<ContainerInfo[]>;
  /** What each running sandbox of one installation has written to its own disk (Docker: its writable layer). */
  diskUsage(installationId: string): Promise<SandboxDiskUsage[]>;
  /** The container's output so far, then (`follow`) as it comes until it stops or `signal` aborts. */
  logs(
    id: string,
    options: { follow: boolean; tail?: number; signal: AbortSignal },
  ): Promise<AsyncIterable<SandboxLogLine>>;
  exec(id: string, spec: ExecSpec): Promise<SandboxExec>;
  /** The environment the container was created with: its secrets, for masking them in what it prints. */
  environment(id: string): Promise<Record<string, string>>;
};

/** Images: what sandboxes and apps run, built by the engine that runs them. */
export type ImageVerbs = {
  imageExists(tag: string): Promise<boolean>;
  /**
   * Builds and tags an image, telling `onStep` each step as it starts (`2/5 RUN make`); resolves with the build
   * log, as plain text (protocol/terminal-text.ts). A failure rejects with IMAGE_BUILD_FAILED whose message names
   * the failing step and whose `log` is that step's output.
   */
  buildImage(build: ImageBuild, onStep?: (step: string) => void): Promise<string>;
};

/** The host: where the API meets its sandboxes, and what of the host they may reach. */
export type HostVerbs = {
  /** The installation's sandbox networks that exist (sandboxes make them): the API listens on their host
   * addresses at start, for sandboxes still running from before. */
  networks(installationId: string): Promise<SandboxNetwork[]>;
  /**
   * Closes every port of the host to the installation's sandboxes, app containers and image builds but
   * `access.ports`, on its networks now and as they are made, until `unlimitHost`. Resolves with whether it could,
   * or undefined when the host's firewall is not this process's to change nor to see (an API in a container: the
   * CLI that starts the stack installs it).
   */
  limitHost(access: HostAccess): Promise<HostAccessState | undefined>;
  /** The holder's ports close; once no holder is left the host is open to the sandboxes again (the API stopped). */
  unlimitHost(access: Pick<HostAccess, "installationId" | "holder">): Promise<void>;
  /**
   * How a sandbox whose project lists no egress goes out: `open` where `limitHost` closes the host's other ports to
   * it; `proxy` on an engine whose hosts no firewall of ours reaches (Swarm's nodes), where the API's proxy lets it
   * reach public hosts only.
   */
  unlistedEgress(): Promise<SandboxEgress>;
};

/** A module that needs only a part says so in its deps (ContainerVerbs, ImageVerbs, HostVerbs). */
export type SandboxDriver = ContainerVerbs & ImageVerbs & HostVerbs;
