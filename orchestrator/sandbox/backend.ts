import { hostname } from "node:os";
import Docker from "dockerode";
import { SANDBOX_API_ALIAS, SANDBOX_SERVICE_PORT } from "../../protocol/env.ts";
import { LOCAL_BASE_IMAGE, PUBLIC_BASE_IMAGE } from "../../protocol/stack-settings.ts";
import { attachedNetworking } from "./attached-network.ts";
import { createDockerDriver } from "./docker-driver.ts";
import type { SandboxDriver, SandboxNetwork } from "./driver.ts";
import { sharedNetworking } from "./shared-network.ts";
import { createSwarmDriver, type SwarmSettings } from "./swarm-driver.ts";
import { requireSwarmManager } from "./swarm-manager.ts";

export type NetworkingChoice =
  | { kind: "shared"; onNetwork?: (network: SandboxNetwork) => Promise<void> }
  | { kind: "attached"; subnetPool: string };

/** Which driver runs sandboxes (SVC_SANDBOX_DRIVER): this engine's containers, or services of the swarm it manages. */
export type DriverChoice = { kind: "docker" } | ({ kind: "swarm" } & SwarmSettings);

/**
 * The sandbox backend this process runs on: Docker, when an engine answers, else undefined (the API then serves
 * everything but sessions). Another backend (Kubernetes) plugs in here without touching the API.
 * The base image defaults to the locally built one when present (no registry here), else the public one.
 * `adopt` (attached networking) joins this API container to the sandbox networks that exist already.
 * With the swarm driver the engine must be a Swarm manager: otherwise this rejects, saying to run `docker swarm init`.
 */
export async function connectSandboxBackend(options: {
  baseImage?: string;
  networking: NetworkingChoice;
  /** Default: the Docker driver. */
  driver?: DriverChoice;
  /** The Docker driver's: the directory of the API's link socket on the engine's host (docker-driver.ts). */
  linkSocketDir?: string;
}): Promise<
  { driver: SandboxDriver; baseImage: string; adopt: (installationId: string) => Promise<number> } | undefined
> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch {
    return undefined;
  }
  const hasLocalBase = await docker
    .getImage(LOCAL_BASE_IMAGE)
    .inspect()
    .then(() => true)
    .catch(() => false);
  const baseImage = options.baseImage ?? (hasLocalBase ? LOCAL_BASE_IMAGE : PUBLIC_BASE_IMAGE);
  const choice = options.networking;
  if (options.driver?.kind === "swarm") {
    await requireSwarmManager(docker);
    const { kind: _, ...settings } = options.driver;
    const onNetwork = choice.kind === "shared" ? choice.onNetwork : undefined;
    return {
      driver: createSwarmDriver({ docker, servicePort: SANDBOX_SERVICE_PORT, settings, onNetwork }),
      baseImage,
      // Swarm sandboxes live on networks of their own that no API container joins: nothing to adopt.
      adopt: async () => 0,
    };
  }
  // In a container the hostname is the container's id unless someone set another.
  const attached =
    choice.kind === "attached"
      ? attachedNetworking({ docker, self: hostname(), subnetPool: choice.subnetPool, apiAlias: SANDBOX_API_ALIAS })
      : undefined;
  const networking =
    attached ??
    sharedNetworking({
      docker,
      onNetwork: choice.kind === "shared" ? choice.onNetwork : undefined,
    });
  return {
    driver: createDockerDriver({
      docker,
      servicePort: SANDBOX_SERVICE_PORT,
      networking,
      linkSocketDir: options.linkSocketDir,
    }),
    baseImage,
    adopt: async (installationId) => (attached ? attached.adopt(installationId) : 0),
  };
}
