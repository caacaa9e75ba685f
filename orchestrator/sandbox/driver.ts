/**
 * What the orchestrator needs from a sandbox backend. Docker implements it now (docker-driver.ts); a
 * Kubernetes driver would implement the same six calls plus image builds.
 *
 * Isolation is the driver's business and every driver provides it: a sandbox reaches the host (the API and the
 * model gateway, by the host alias) and the outside world, never another sandbox's ports; its service port is
 * reachable from the host only. Docker: one bridge network per installation without inter-container traffic;
 * Kubernetes: a NetworkPolicy.
 */

/** Names the installation a sandbox belongs to; a driver groups an installation's sandboxes by it. */
export const INSTALLATION_LABEL = "dev.svc.installation";

export type SandboxSpec = {
  name: string;
  image: string;
  env: Record<string, string>;
  /** Metadata; INSTALLATION_LABEL among them places the sandbox with its installation's others. */
  labels: Record<string, string>;
  /** The daemon's port inside the sandbox; published on the host's loopback only. */
  servicePort: number;
  limits: { memoryBytes: number; nanoCpus: number; pids: number };
};

export type SandboxInfo = {
  id: string;
  name: string;
  running: boolean;
  labels: Record<string, string>;
  /** Host port the daemon is published on (loopback), once running. */
  hostPort: number | null;
};

export type ImageBuild = {
  tag: string;
  /** A tar stream of the build context, or a directory and the files in it. */
  context: NodeJS.ReadableStream | { dir: string; files: string[] };
  buildArgs?: Record<string, string>;
};

export type SandboxDriver = {
  create(spec: SandboxSpec): Promise<string>;
  start(id: string): Promise<SandboxInfo>;
  stop(id: string): Promise<void>;
  remove(id: string): Promise<void>;
  inspect(id: string): Promise<SandboxInfo | undefined>;
  listByLabel(label: string, value?: string): Promise<SandboxInfo[]>;
  imageExists(tag: string): Promise<boolean>;
  /** Builds and tags an image; resolves with the build log, rejects with it on failure. */
  buildImage(build: ImageBuild): Promise<string>;
};
