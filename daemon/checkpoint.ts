import { rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkpointRef } from "../protocol/git.ts";
import type { DaemonConfig } from "./config.ts";
import { git } from "./workspace.ts";

const quiet = (p: Promise<unknown>) =>
  p.then(
    () => true,
    () => false,
  );

/**
 * POST /svc/checkpoint, before the sandbox stops: everything in the workspace that is not on the session branch's
 * remote (uncommitted and untracked files, .gitignore respected, and unpushed commits) becomes one commit on top of
 * HEAD, pushed to the checkpoint ref and never to the branch. With nothing unsaved the ref is deleted, so an old
 * checkpoint is never restored over newer pushed work. The commit's sha, or null.
 */
export async function saveCheckpoint(config: DaemonConfig): Promise<{ sha: string | null }> {
  const cwd = config.workspace;
  const ref = checkpointRef(config.sessionId);
  const head = await git(["rev-parse", "--verify", "--quiet", "HEAD"], cwd).catch(() => "");
  if (!config.sessionId || !head) return { sha: null };
  // A throwaway index: the agent's own staging is left as it was.
  const index = join(tmpdir(), `svc-checkpoint-${process.pid}.index`);
  const env = { GIT_INDEX_FILE: index };
  try {
    await git(["read-tree", "HEAD"], cwd, env);
    await git(["add", "--all", "--", "."], cwd, env);
    const tree = await git(["write-tree"], cwd, env);
    const pushed = await git(["rev-parse", "--verify", "--quiet", `refs/remotes/origin/${config.branch}`], cwd).catch(
      () => "",
    );
    if (tree === (await git(["rev-parse", "HEAD^{tree}"], cwd)) && pushed === head) {
      await quiet(git(["push", "--quiet", "origin", `:${ref}`], cwd));
      return { sha: null };
    }
    const sha = await git(
      ["commit-tree", tree, "-p", head, "-m", `svc checkpoint of session ${config.sessionId}`],
      cwd,
    );
    await git(["push", "--quiet", "--force", "origin", `${sha}:${ref}`], cwd);
    return { sha };
  } finally {
    await rm(index, { force: true });
  }
}

export type RestoreOutcome =
  | { state: "none" }
  | { state: "restored"; sha: string }
  | { state: "left"; sha: string; reason: string };

/**
 * After the clone: the session's checkpoint, if it has one, put back. Its parent (HEAD when it was taken) must be
 * the fresh clone's HEAD or descend from it; HEAD then moves there (the unpushed commits come back) and the
 * checkpoint's changes are applied to the files, unstaged, all or nothing. Anything else (the branch moved on, a
 * change that does not apply) leaves the workspace as cloned and the checkpoint at its ref, with the reason.
 */
export async function restoreCheckpoint(config: DaemonConfig): Promise<RestoreOutcome> {
  const cwd = config.workspace;
  const ref = checkpointRef(config.sessionId);
  if (!config.sessionId || !(await quiet(git(["fetch", "--quiet", "--no-tags", "origin", `+${ref}:${ref}`], cwd))))
    return { state: "none" };
  const sha = await git(["rev-parse", ref], cwd);
  const parent = await git(["rev-parse", `${sha}^`], cwd);
  const head = await git(["rev-parse", "HEAD"], cwd);
  if (!(await quiet(git(["merge-base", "--is-ancestor", head, parent], cwd)))) {
    return { state: "left", sha, reason: `the session branch moved since it was taken (now ${head.slice(0, 12)})` };
  }
  const patch = join(tmpdir(), `svc-checkpoint-${process.pid}.patch`);
  try {
    await git(["diff", "--binary", `--output=${patch}`, parent, sha], cwd);
    if (parent !== head) await git(["reset", "--quiet", "--keep", parent], cwd);
    try {
      if ((await stat(patch)).size > 0) await git(["apply", "--whitespace=nowarn", patch], cwd);
    } catch (err) {
      if (parent !== head) await git(["reset", "--quiet", "--keep", head], cwd);
      const why = (err as Error).message.split("\n").filter(Boolean).slice(-2).join(" ");
      return { state: "left", sha, reason: `its changes do not apply: ${why}` };
    }
  } finally {
    await rm(patch, { force: true });
  }
  return { state: "restored", sha };
}
