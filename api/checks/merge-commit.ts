import { commitMerge } from "../git/merge.ts";
import type { PreviewCache } from "../git/merge-preview.ts";
import { mergeTree } from "../git/merge-preview.ts";
import { git } from "../git/run.ts";

/** Where the commit a CR's checks ran on is kept, so the run can always be looked at again. */
export const mergeRef = (number: number) => `refs/svc/merges/${number}`;

/**
 * The commit a CR's merge would create now: the base itself when everything is on it, the head when it
 * fast-forwards, else the two-parent merge (the same tree the merge writes, `git merge-tree`, no worktree); the head
 * alone when they conflict or share no history. Kept under `refs/svc/merges/<n>`.
 */
export async function mergeCommitFor(
  dir: string,
  previews: PreviewCache,
  cr: { number: number; title: string },
  base: string,
  head: string,
): Promise<string> {
  const preview = await previews.get(dir, base, head);
  let commit = head;
  if (preview.can_merge && preview.is_up_to_date) commit = base;
  else if (preview.can_merge && !preview.can_fast_forward) {
    const merged = await mergeTree(dir, base, head);
    if (merged.clean) commit = await commitMerge(dir, merged.tree, base, head, `Merge CR #${cr.number}: ${cr.title}`);
  }
  await git(["update-ref", mergeRef(cr.number), commit], { dir });
  return commit;
}
