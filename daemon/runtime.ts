import { type ChildProcess, spawn } from "node:child_process";
import type { AgentRuntimeState } from "../protocol/daemon.ts";
import { httpRequest } from "./http-json.ts";

export type RuntimeSpec = { command: string[]; env: Record<string, string>; cwd: string; port: number };

const BACKOFF_MS = [500, 1000, 2000, 5000, 10_000, 30_000];
const READY_TIMEOUT_MS = 60_000;
const KILL_GRACE_MS = 5000;

/** True once anything answers HTTP on the port; a short timeout per try, since early connections can hang. */
async function answers(port: number): Promise<boolean> {
  try {
    await httpRequest("GET", `http://127.0.0.1:${port}/`, { timeoutMs: 500 });
    return true;
  } catch {
    return false;
  }
}

/**
 * Supervises the agent runtime: starts it, waits until it serves, restarts it with backoff when it dies,
 * and restarts it on demand (new environment, refreshed workspace).
 */
export function createRuntimeSupervisor(getSpec: () => RuntimeSpec, log: (msg: string) => void) {
  let child: ChildProcess | undefined;
  let state: AgentRuntimeState = "stopped";
  let restarts = 0;
  let failures = 0;
  let lastError: string | null = null;
  let wanted = false;
  let ready: Promise<void> = Promise.resolve();
  /**
   * Left to start at its first use (wake): a session with nothing for its agent to do yet, whose sandbox may serve
   * only commands, previews and pushes, spends no agent boot (seconds of a core) and no agent's memory.
   */
  let standby = false;

  function launch(): void {
    const spec = getSpec();
    state = restarts === 0 ? "starting" : "restarting";
    const proc = spawn(spec.command[0]!, spec.command.slice(1), {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ["ignore", "inherit", "inherit"],
    });
    child = proc;
    proc.on("error", (err) => {
      lastError = err.message;
    });
    proc.on("exit", (code, signal) => {
      if (child !== proc) return;
      child = undefined;
      if (!wanted) {
        state = "stopped";
        return;
      }
      lastError = `agent runtime exited (${signal ?? code})`;
      const delay = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)]!;
      failures += 1;
      restarts += 1;
      state = "restarting";
      log(`${lastError}; restarting in ${delay} ms`);
      setTimeout(() => {
        if (wanted && !child) start();
      }, delay);
    });
    ready = (async () => {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      while (Date.now() < deadline && child === proc) {
        if (await answers(spec.port)) {
          state = "running";
          failures = 0;
          lastError = null;
          return;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  }

  function start(): void {
    standby = false;
    wanted = true;
    if (!child) launch();
  }

  /** Starts a runtime on standby; resolves once the runtime runs (booting for any reason), or after `waitMs`. */
  async function wake(waitMs = 0): Promise<void> {
    if (standby) {
      log("the agent runtime starts at its first use");
      start();
    }
    if (waitMs === 0 || state === "running") return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([ready, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  async function stop(): Promise<void> {
    wanted = false;
    const proc = child;
    if (!proc) return;
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    proc.kill("SIGTERM");
    // opencode ignores SIGTERM while its background install runs: don't wait forever.
    const timer = setTimeout(() => proc.kill("SIGKILL"), KILL_GRACE_MS);
    await exited;
    clearTimeout(timer);
    state = "stopped";
  }

  return {
    start,
    standBy(): void {
      if (!child) standby = true;
    },
    wake,
    stop,
    /** Restarts a running runtime (new environment, refreshed workspace); one on standby stays so: false. */
    async restart(): Promise<boolean> {
      if (standby) return false;
      await stop();
      restarts += 1;
      start();
      await ready;
      return true;
    },
    /** Resolves when the current launch serves (or gave up). */
    whenReady: () => ready,
    status: () => ({
      state: standby ? ("standby" as const) : state,
      pid: child?.pid ?? null,
      restarts,
      error: lastError,
    }),
  };
}

export type RuntimeSupervisor = ReturnType<typeof createRuntimeSupervisor>;
