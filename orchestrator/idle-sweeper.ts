import { DaemonHealth } from "../protocol/daemon.ts";
import type { Log, SandboxRecords } from "./ports.ts";
import type { Provisioner } from "./provisioning/provisioner.ts";

export type SweeperDeps = {
  records: SandboxRecords;
  provisioner: Provisioner;
  idleMs: number;
  log: Log;
};

/**
 * Hibernates sandboxes nobody uses: a daemon that reports no proxied request, no control call and no agent
 * run for `idleMs` gets its session stopped and its container removed. The branch keeps the work.
 */
export function createIdleSweeper(deps: SweeperDeps) {
  return async function sweep(): Promise<string[]> {
    const stopped: string[] = [];
    for (const sandbox of await deps.records.liveSandboxes()) {
      if (sandbox.status !== "active" || !sandbox.url) continue;
      let health: DaemonHealth;
      try {
        const res = await fetch(`${sandbox.url}/svc/health`, { signal: AbortSignal.timeout(2000) });
        health = DaemonHealth.parse(await res.json());
      } catch {
        continue; // An unreachable daemon is the reconciler's business, not idleness.
      }
      await deps.records.touchActivity(sandbox.sandbox_id, health.last_activity_at);
      if (health.busy || Date.now() - Date.parse(health.last_activity_at) < deps.idleMs) continue;
      if (await deps.records.transition(sandbox.session_id, ["running"], "stopped")) {
        await deps.provisioner.closeSandbox(sandbox, "stopped", "idle");
        stopped.push(sandbox.session_id);
        deps.log("idle sandbox hibernated", { session: sandbox.session_id });
      }
    }
    return stopped;
  };
}
