import type { Log, SandboxRecords } from "./ports.ts";
import type { Provisioner } from "./provisioning/provisioner.ts";
import type { ContainerVerbs } from "./sandbox/driver.ts";

const MB = 1024 * 1024;

export type DiskWatchDeps = {
  driver: ContainerVerbs;
  records: SandboxRecords;
  provisioner: Provisioner;
  installationId: string;
  /** SVC_SANDBOX_DISK_MB: a sandbox that has written more is stopped. */
  limitMb: number;
  log: Log;
};

/**
 * Keeps sandboxes from filling the engine's disk: one whose own writes passed `limitMb` gets its session stopped with
 * that reason as its error, and its container (and what it wrote) removed, as the idle sweeper does. The engine has
 * no quota for a container's writable layer on most filesystems (overlay2 needs xfs with project quotas), so this
 * looks each tick: a sandbox may overshoot by what it writes within one.
 */
export function createDiskWatch(deps: DiskWatchDeps) {
  return async function watch(): Promise<string[]> {
    const over = new Map(
      (await deps.driver.diskUsage(deps.installationId))
        .filter((usage) => usage.bytes > deps.limitMb * MB)
        .map((usage) => [usage.sandboxId, usage.bytes]),
    );
    if (over.size === 0) return [];
    const stopped: string[] = [];
    for (const sandbox of await deps.records.liveSandboxes()) {
      const bytes = over.get(sandbox.sandbox_id);
      if (bytes === undefined || sandbox.status !== "active") continue;
      const reason = `the sandbox's disk use passed SVC_SANDBOX_DISK_MB (${deps.limitMb} MB): ${Math.round(bytes / MB)} MB written`;
      if (await deps.records.transition(sandbox.session_id, ["running"], "stopped", { error: reason })) {
        await deps.provisioner.closeSandbox(sandbox, "stopped", reason);
        stopped.push(sandbox.session_id);
        deps.log("sandbox stopped past its disk limit", { session: sandbox.session_id, bytes });
      }
    }
    return stopped;
  };
}
