import { type RefsStamp, stampRefs } from "./refs-stamp.ts";
import { git } from "./run.ts";

export type BranchTips = Map<string, string>;

/** All branch tips of a repository in one git call. */
export async function readBranchTips(dir: string): Promise<BranchTips> {
  const { stdout } = await git(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"], { dir });
  const tips: BranchTips = new Map();
  for (const line of stdout.split("\n")) {
    if (!line) continue;
    const space = line.indexOf(" ");
    tips.set(line.slice(space + 1 + "refs/heads/".length), line.slice(0, space));
  }
  return tips;
}

// Bounds what a stamp could ever miss (a filesystem whose clock is far off ours).
const RECHECK_MS = 30_000;

/**
 * Branch tips per repository, shared by every request: reads within `ttlMs` of each other cost no git process,
 * concurrent misses share one. Past the TTL, tips are read again only when the refs on disk changed (their
 * stamp), or at the latest every RECHECK_MS. Writers through the service call `invalidate`; the stamp catches a
 * change made behind the service's back (another replica, a direct filesystem write) within the TTL.
 */
export function createTipsCache(options: { ttlMs: number }) {
  type Entry = { at: number; readAt: number; tips: Promise<BranchTips>; stamp: Promise<RefsStamp | undefined> };
  const entries = new Map<string, Entry>();
  return {
    /** `ttlMs` 0: no answer read before this call (the refs' stamp still spares the git process when none moved). */
    get(dir: string, ttlMs = options.ttlMs): Promise<BranchTips> {
      const hit = entries.get(dir);
      const now = Date.now();
      if (hit && now - hit.at < ttlMs) return hit.tips;
      const stamp = stampRefs(dir);
      const reuse = hit && now - hit.readAt < RECHECK_MS ? hit : undefined;
      const entry = { at: now, readAt: now, stamp } as Entry;
      entry.tips = (async () => {
        const [before, current] = await Promise.all([reuse?.stamp, stamp]);
        if (reuse && before?.settled && before.key === current?.key) {
          entry.readAt = reuse.readAt;
          return reuse.tips;
        }
        return readBranchTips(dir);
      })();
      entries.set(dir, entry);
      entry.tips.catch(() => entries.delete(dir));
      return entry.tips;
    },
    invalidate(dir: string): void {
      entries.delete(dir);
    },
  };
}

export type TipsCache = ReturnType<typeof createTipsCache>;

/**
 * Whether the branch tip `tip` holds `sha`: equal to it or a descendant of it. False when `sha` is no commit of
 * this repository (an external mirror cloned afresh lacks a merge commit that was never pushed).
 */
export async function tipHolds(dir: string, tip: string, sha: string): Promise<boolean> {
  if (tip === sha) return true;
  const present = await git(["cat-file", "-e", `${sha}^{commit}`], { dir, okCodes: [1, 128] });
  if (present.exitCode !== 0) return false;
  const { exitCode } = await git(["merge-base", "--is-ancestor", sha, tip], { dir, okCodes: [1] });
  return exitCode === 0;
}
