/**
 * What the orchestrator needs from a sandbox backend. Docker implements it now (docker-driver.ts); a
 * Kubernetes driver would implement the same six calls plus image builds.
 */
export type SandboxSpec = {
  name: string;
  image: string;
  env: Record<string, string>;
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
