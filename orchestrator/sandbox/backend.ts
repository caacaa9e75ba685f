import Docker from "dockerode";
import { SANDBOX_SERVICE_PORT } from "../../protocol/env.ts";
import { LOCAL_BASE_IMAGE, PUBLIC_BASE_IMAGE } from "../../protocol/stack-settings.ts";
import { createDockerDriver } from "./docker-driver.ts";
import type { SandboxDriver, SandboxNetwork } from "./driver.ts";

/**
 * The sandbox backend this process runs on: Docker, when an engine answers, else undefined (the API then serves
 * everything but sessions). Another backend (Kubernetes) plugs in here without touching the API.
 * The base image defaults to the locally built one when present (no registry here), else the public image.
 */
export async function connectSandboxBackend(
  options: { baseImage?: string; onNetwork?: (network: SandboxNetwork) => Promise<void> } = {},
): Promise<{ driver: SandboxDriver; baseImage: string } | undefined> {
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
  return {
    driver: createDockerDriver({ docker, servicePort: SANDBOX_SERVICE_PORT, onNetwork: options.onNetwork }),
    baseImage: options.baseImage ?? (hasLocalBase ? LOCAL_BASE_IMAGE : PUBLIC_BASE_IMAGE),
  };
}
