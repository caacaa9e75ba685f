import type { MergePreview } from "../../protocol/change-request.ts";
import { git } from "./run.ts";

export async function mergeBase(dir: string, a: string, b: string): Promise<string | null> {
  const { stdout, exitCode } = await git(["merge-base", a, b], { dir, okCodes: [1] });
  return exitCode === 0 ? stdout.trim() : null;
}

export type MergeTreeResult = { clean: true; tree: string } | { clean: false; conflicts: string[] };

/** A three-way merge of two commits into a tree object, with no worktree (`git merge-tree --write-tree`). */
export async function mergeTree(dir: string, base: string, head: string): Promise<MergeTreeResult> {
  const { stdout, exitCode } = await git(
    ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", base, head],
    {
      dir,
      okCodes: [1],
    },
  );
  const [tree, ...paths] = stdout.split("\0").filter(Boolean);
  if (exitCode === 0) return { clean: true, tree: tree! };
  return { clean: false, conflicts: [...new Set(paths)] };
}

/**
 * The merge preview of SPEC "Merge preview". Unrelated histories cannot be merged (git refuses them by default):
 * merge_base null, can_merge false, no conflict paths.
 */
export async function computePreview(dir: string, baseSha: string, headSha: string): Promise<MergePreview> {
  const base = await mergeBase(dir, baseSha, headSha);
  const preview: MergePreview = {
    base_sha: baseSha,
    head_sha: headSha,
    merge_base: base,
    is_up_to_date: base === headSha,
    can_merge: true,
    can_fast_forward: base === baseSha && headSha !== baseSha,
    conflicts: [],
  };
  if (base === null) return { ...preview, can_merge: false };
  if (preview.is_up_to_date || preview.can_fast_forward) return preview;
  const merged = await mergeTree(dir, baseSha, headSha);
  return merged.clean ? preview : { ...preview, can_merge: false, conflicts: merged.conflicts };
}

/** A preview is a pure function of (repository, base, head): cache it, bounded, oldest out first. */
export function createPreviewCache(maxEntries = 2000) {
  const entries = new Map<string, Promise<MergePreview>>();
  return {
    get(dir: string, baseSha: string, headSha: string): Promise<MergePreview> {
      const key = `${dir}\0${baseSha}\0${headSha}`;
      const hit = entries.get(key);
      if (hit) return hit;
      const preview = computePreview(dir, baseSha, headSha);
      entries.set(key, preview);
      preview.catch(() => entries.delete(key));
      if (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
      return preview;
    },
  };
}

export type PreviewCache = ReturnType<typeof createPreviewCache>;
