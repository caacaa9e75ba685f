import type Docker from "dockerode";
import { OrchestratorError } from "../errors.ts";

/** What `docker info` says of the engine's place in a swarm. */
type SwarmInfo = { LocalNodeState?: string; ControlAvailable?: boolean; Error?: string };

/**
 * The swarm driver creates services, which only a manager can: anything else (no swarm, a worker, a node that lost
 * its managers) stops the start with what to run, rather than failing every session later.
 */
export async function requireSwarmManager(docker: Docker): Promise<void> {
  const swarm = ((await docker.info()) as { Swarm?: SwarmInfo }).Swarm ?? {};
  if (swarm.LocalNodeState === "active" && swarm.ControlAvailable) return;
  const state =
    swarm.LocalNodeState === "active"
      ? "a worker node, not a manager"
      : `not in a swarm (${swarm.LocalNodeState ?? "unknown"})`;
  throw new OrchestratorError(
    "SANDBOX_BACKEND_FAILED",
    `SVC_SANDBOX_DRIVER=swarm needs the Docker engine to be a Swarm manager, and it is ${state}${swarm.Error ? `: ${swarm.Error}` : ""}: run 'docker swarm init' (or join it to a swarm as a manager), or set SVC_SANDBOX_DRIVER=docker`,
  );
}
