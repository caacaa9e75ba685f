import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { computePreview, createPreviewCache } from "../../api/git/merge-preview.ts";
import { git } from "../../api/git/run.ts";
import { historyFixture } from "./history-fixture.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const RUNS = 7;

/** What a worktree-based check costs: clone --shared, check out base, merge head, throw it away. */
async function worktreeCheck(bare: string, base: string, head: string): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-wt-"));
  try {
    await git(["clone", "--shared", "--quiet", "--no-checkout", bare, dir]);
    await git(["checkout", "--quiet", "--detach", base], { dir });
    const merged = await git(["-c", "user.name=b", "-c", "user.email=b@b", "merge", "--no-commit", "--no-ff", head], {
      dir,
      okCodes: [1],
    });
    return merged.exitCode === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchMergePreview() {
  const buildStart = performance.now();
  const fixture = await historyFixture();
  const buildMs = performance.now() - buildStart;
  const sha = async (ref: string) => (await git(["rev-parse", ref], { dir: fixture.dir })).stdout.trim();
  const [base, head, conflict] = await Promise.all([sha("base"), sha("head"), sha("head-conflict")]);

  // Correctness first, so the timings cannot be measuring a failure.
  const clean = await computePreview(fixture.dir, base, head);
  const conflicted = await computePreview(fixture.dir, base, conflict);
  if (!clean.can_merge || clean.can_fast_forward || conflicted.can_merge || conflicted.conflicts.length === 0) {
    throw new Error(
      `fixture previews are wrong: ${JSON.stringify({ clean, conflicted: { ...conflicted, conflicts: conflicted.conflicts.length } })}`,
    );
  }
  if (!(await worktreeCheck(fixture.dir, base, head)) || (await worktreeCheck(fixture.dir, base, conflict))) {
    throw new Error("the worktree baseline disagrees with the preview");
  }

  const worktree = await timeRuns(RUNS, () => worktreeCheck(fixture.dir, base, head));
  const preview = await timeRuns(RUNS, () => computePreview(fixture.dir, base, head));
  const previewConflict = await timeRuns(RUNS, () => computePreview(fixture.dir, base, conflict));
  const cache = createPreviewCache();
  await cache.get(fixture.dir, base, head);
  const cached = await timeRuns(200, () => cache.get(fixture.dir, base, head));

  const result = {
    commits: fixture.commits,
    files: fixture.files,
    fixtureMs: buildMs,
    worktreeP50: percentile(worktree, 50),
    worktreeP95: percentile(worktree, 95),
    previewP50: percentile(preview, 50),
    previewP95: percentile(preview, 95),
    conflictP50: percentile(previewConflict, 50),
    cachedP50: percentile(cached, 50),
    cachedP95: percentile(cached, 95),
  };
  const speedup = result.worktreeP50 / result.previewP50;
  return {
    ...result,
    speedup,
    ok: speedup >= 3 && result.cachedP95 < 25,
    line: `merge-preview (${result.commits.toLocaleString("en")} commits, ${result.files} files): worktree p50 ${ms(result.worktreeP50)} ms (p95 ${ms(result.worktreeP95)}) | merge-tree p50 ${ms(result.previewP50)} ms (p95 ${ms(result.previewP95)}; conflicting pair ${ms(result.conflictP50)}) | speedup ${speedup.toFixed(1)}x (need >= 3x) | cached p50 ${ms(result.cachedP50)} ms, p95 ${ms(result.cachedP95)} ms (need < 25 ms)`,
  };
}
