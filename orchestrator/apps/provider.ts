import type { AppSpec } from "../../protocol/manifest.ts";
import type { AppContainerInfo, AppOwner, SandboxLogLine } from "../sandbox/driver.ts";

/** One app to build at one revision of the project's repository, for the deploy `owner` names. */
export type AppBuild = {
  gitDir: string;
  revision: string;
  spec: AppSpec;
  key: string;
  platformImage: string;
  owner: AppOwner;
};

/**
 * Where apps run. The deployer decides what to deploy and when; a provider only builds, runs and removes. The
 * local provider (local-provider.ts) runs each deploy as a container beside the sandboxes; another (a cluster, a
 * PaaS) implements the same calls.
 */
export type AppProvider = {
  /** The image for the app at `revision` (built once per key; an existing one is reused). */
  image(build: AppBuild): Promise<string>;
  /** Creates and starts the deploy's instance; `endpoint` is where the API reaches the app's port. */
  run(input: {
    name: string;
    image: string;
    spec: AppSpec;
    env: Record<string, string>;
    owner: AppOwner;
  }): Promise<{ id: string; endpoint: string }>;
  inspect(id: string): Promise<AppContainerInfo | undefined>;
  /** Every instance of the installation, running or not. */
  list(installationId: string): Promise<AppContainerInfo[]>;
  remove(id: string): Promise<void>;
  /** The instance's output, with the values of its env vars named in `secretNames` masked. */
  logs(
    id: string,
    options: { follow: boolean; tail?: number; signal: AbortSignal; secretNames: string[] },
  ): Promise<AsyncIterable<SandboxLogLine>>;
};
