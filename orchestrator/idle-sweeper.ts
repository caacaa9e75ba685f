import { DaemonHealth } from "../protocol/daemon.ts";
import type { SessionService } from "./sessions/service.ts";
import type { SessionStore } from "./sessions/store.ts";

export type SweeperDeps = {
  store: SessionStore;
  sessions: SessionService;
  idleMs: number;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

/**
 * Hibernates sandboxes nobody uses: a daemon that reports no proxied request, no control call and no agent
 * run for `idleMs` gets its session stopped and its container removed. The branch keeps the work.
 */
export function createIdleSweeper(deps: SweeperDeps) {
  return async function sweep(): Promise<string[]> {
    const stopped: string[] = [];
    for (const sandbox of await deps.store.liveSandboxes()) {
      if (sandbox.status !== "active" || !sandbox.url) continue;
      let health: DaemonHealth;
      try {
        const res = await fetch(`${sandbox.url}/svc/health`, { signal: AbortSignal.timeout(2000) });
        health = DaemonHealth.parse(await res.json());
      } catch {
        continue; // An unreachable daemon is the reconciler's business, not idleness.
      }
      await deps.store.touchActivity(sandbox.sandbox_id, health.last_activity_at);
      if (health.busy || Date.now() - Date.parse(health.last_activity_at) < deps.idleMs) continue;
      if (await deps.store.transition(sandbox.session_id, ["running"], "stopped")) {
        await deps.sessions.closeSandbox(sandbox, "stopped", "idle");
        stopped.push(sandbox.session_id);
        deps.log("idle sandbox hibernated", { session: sandbox.session_id });
      }
    }
    return stopped;
  };
}
