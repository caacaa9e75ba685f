import type { DaemonHealth } from "../protocol/daemon.ts";
import { restoreCheckpoint } from "./checkpoint.ts";
import type { DaemonConfig } from "./config.ts";
import { cloneWorkspace } from "./workspace.ts";

const CLONE_ATTEMPTS = 5;

/** The workspace's state as `/svc/health` reports it, moved here as the clone goes. */
export type RepoState = { state: DaemonHealth["repo"]["state"]; error: string | null };

/** The session's checkpoint into the fresh clone; one that cannot be put back is left at its ref, and said. */
async function putCheckpointBack(config: DaemonConfig, log: (msg: string) => void): Promise<void> {
  const restore = await restoreCheckpoint(config).catch((err: Error) => ({
    state: "left" as const,
    sha: "(unread)",
    reason: err.message,
  }));
  if (restore.state === "restored") log(`restored checkpoint ${restore.sha} into the workspace`);
  if (restore.state === "left") log(`checkpoint ${restore.sha} not restored, left at its ref: ${restore.reason}`);
}

/**
 * A cold sandbox's workspace: cloned, tried again half a second longer after each failure (a loaded host's first
 * fetch can fail), with the session's unsaved work from its last sandbox back before the session counts as running.
 */
export async function cloneSessionWorkspace(
  config: DaemonConfig,
  repo: RepoState,
  credentialHelper: string,
  log: (msg: string) => void,
): Promise<void> {
  for (let attempt = 1; attempt <= CLONE_ATTEMPTS && repo.state === "cloning"; attempt++) {
    try {
      await cloneWorkspace(config, credentialHelper);
      await putCheckpointBack(config, log);
      repo.state = "cloned";
      repo.error = null;
    } catch (err) {
      repo.error = (err as Error).message.split("\n").slice(-2).join(" ");
      log(`clone attempt ${attempt} failed: ${repo.error}`);
      if (attempt === CLONE_ATTEMPTS) repo.state = "failed";
      else await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
}
