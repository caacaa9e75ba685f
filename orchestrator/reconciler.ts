import type { Log, SandboxRecords } from "./ports.ts";
import type { Provisioner } from "./provisioning/provisioner.ts";
import type { ContainerVerbs, SandboxInfo } from "./sandbox/driver.ts";

export type ReconcilerDeps = {
  driver: ContainerVerbs;
  records: SandboxRecords;
  provisioner: Provisioner;
  installationId: string;
  /** Whether the API process with this instance id still runs (cluster.ts). */
  isAlive: (instanceId: string | null) => Promise<boolean>;
  log: Log;
};

/**
 * Makes Docker and the database agree: no container without a live sandbox row, no live row without a
 * running container, no session left `provisioning` by a process that died. Runs at start and on a timer, in
 * the leading API process only; a session another live process is provisioning is that process's business.
 */
export function createReconciler(deps: ReconcilerDeps) {
  const { driver, records, provisioner, log } = deps;
  const beingProvisioned = async (sessionId: string, instance: string | null) =>
    provisioner.isProvisioning(sessionId) || (await deps.isAlive(instance));
  // Only this installation's containers: another stack on the same engine keeps its own. Only its sandboxes: an
  // app's container has no sandbox row, and is the app deployer's to keep or remove.
  const sandboxes = async () => (await driver.list(deps.installationId)).filter((c) => c.kind === "sandbox");

  async function removeOrphans(
    containers: SandboxInfo[],
    live: Awaited<ReturnType<SandboxRecords["liveSandboxes"]>>,
  ): Promise<number> {
    const liveIds = new Set(live.map((s) => s.sandbox_id));
    let removed = 0;
    for (const c of containers) {
      const { sandboxId, sessionId } = c.owner;
      if (sandboxId && liveIds.has(sandboxId)) continue;
      if (sandboxId && provisioner.isProvisioning(sessionId ?? "")) continue;
      // A warm-pool sandbox has no row until its session claims it: its process's pool holds it while that lives.
      if (c.pool && sessionId && (await deps.isAlive(c.pool)) && !(await records.currentSandbox(sessionId))) continue;
      await driver.remove(c.id);
      removed += 1;
      log("reconciler removed an orphaned container", { container: c.id, sandbox: sandboxId });
    }
    return removed;
  }

  return async function reconcile(): Promise<{
    removedContainers: number;
    closedSandboxes: number;
    failedSessions: number;
  }> {
    const containers = await sandboxes();
    const live = await records.liveSandboxes();
    let removedContainers = await removeOrphans(containers, live);
    let closedSandboxes = 0;
    let failedSessions = 0;

    for (const sandbox of live) {
      if (sandbox.status === "provisioning" && (await beingProvisioned(sandbox.session_id, sandbox.provisioner)))
        continue;
      const container = containers.find((c) => c.owner.sandboxId === sandbox.sandbox_id);
      if (sandbox.status === "active" && container?.running) continue;
      // A sandbox that died or vanished under a running session was not stopped by anyone: the session failed.
      const reason =
        sandbox.status !== "active"
          ? "provisioning was interrupted"
          : container
            ? "the sandbox stopped unexpectedly"
            : "the sandbox container is gone";
      await provisioner.closeSandbox(sandbox, "error", reason);
      closedSandboxes += 1;
      log("reconciler closed a sandbox", { sandbox: sandbox.sandbox_id, reason });
    }

    for (const session of await records.provisioningSessions()) {
      if (await beingProvisioned(session.session_id, session.provisioner)) continue;
      if (
        await records.transition(session.session_id, ["provisioning"], "failed", {
          error: "provisioning was interrupted",
        })
      ) {
        failedSessions += 1;
      }
    }
    // A process killed mid-provision may have had a create request in flight that the engine finishes only
    // now: look again once its rows are closed, so the container does not wait for the next tick.
    if (closedSandboxes + failedSessions > 0) {
      removedContainers += await removeOrphans(await sandboxes(), await records.liveSandboxes());
    }
    return { removedContainers, closedSandboxes, failedSessions };
  };
}
