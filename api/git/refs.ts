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

/**
 * Branch tips per repository, shared by every request: reads within `ttlMs` of each other cost no git process,
 * concurrent misses share one. Writers through the service call `invalidate`, so the TTL only bounds how long a
 * change made behind the service's back (a direct filesystem write) can go unseen.
 */
export function createTipsCache(options: { ttlMs: number }) {
  const entries = new Map<string, { at: number; tips: Promise<BranchTips> }>();
  return {
    get(dir: string): Promise<BranchTips> {
      const hit = entries.get(dir);
      if (hit && Date.now() - hit.at < options.ttlMs) return hit.tips;
      const tips = readBranchTips(dir);
      entries.set(dir, { at: Date.now(), tips });
      tips.catch(() => entries.delete(dir));
      return tips;
    },
    invalidate(dir: string): void {
      entries.delete(dir);
    },
  };
}

export type TipsCache = ReturnType<typeof createTipsCache>;
