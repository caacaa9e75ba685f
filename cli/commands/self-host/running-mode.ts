import { composeRunning } from "./compose.ts";
import { isAlive, readPid } from "./process.ts";
import type { SelfHostPaths, StackMode } from "./state.ts";
import { swarmRunning } from "./swarm.ts";

/** The mode the stack runs in right now, if it runs (a swarm stack runs while it is deployed: `stop` removes it). */
export async function runningMode(paths: SelfHostPaths): Promise<StackMode | undefined> {
  const pid = readPid(paths);
  if (pid && isAlive(pid)) return "embedded";
  if (await composeRunning(paths)) return "compose";
  return (await swarmRunning(paths)) ? "swarm" : undefined;
}
