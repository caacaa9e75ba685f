import { composeRunning } from "./compose.ts";
import { isAlive, readPid } from "./process.ts";
import type { SelfHostPaths, StackMode } from "./state.ts";

/** The mode the stack runs in right now, if it runs. */
export async function runningMode(paths: SelfHostPaths): Promise<StackMode | undefined> {
  const pid = readPid(paths);
  if (pid && isAlive(pid)) return "embedded";
  return (await composeRunning(paths)) ? "compose" : undefined;
}
