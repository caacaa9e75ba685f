import { info } from "../../output.ts";
import { sleep } from "./health.ts";
import { clearPid, isAlive, readPid } from "./process.ts";
import { selfHostPaths } from "./state.ts";

const GRACE_MS = 15_000;

export type StopResult = { stopped: boolean; pid: number | null };

export async function stopSelfHost(): Promise<StopResult> {
  const paths = selfHostPaths();
  const pid = readPid(paths);
  if (!pid || !isAlive(pid)) {
    clearPid(paths);
    info("svc self-host is not running");
    return { stopped: false, pid: null };
  }
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + GRACE_MS;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  if (isAlive(pid)) {
    process.kill(pid, "SIGKILL");
    while (isAlive(pid)) await sleep(50);
  }
  clearPid(paths);
  info(`✓ svc self-host stopped (pid ${pid})`);
  return { stopped: true, pid };
}
