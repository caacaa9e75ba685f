import { statSync } from "node:fs";
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds a test file runs per KB of its source, by tier, when no earlier run of this checkout timed it (always so
 * in CI): measured over a whole run (Docker 2.7, api 0.84; a unit file takes milliseconds).
 */
const SECONDS_PER_KB: Record<string, number> = { docker: 2.7, "docker-swarm": 2.7, api: 0.84, unit: 0.02 };

/**
 * Files in the order whose tail is shortest: the unit tier's first (seconds in all, its failures shown at once; run
 * last, they were the first group's last 14 s after its last Docker file ended), then the longest first, across the
 * tiers of a group (Vitest's own order runs a group's projects one after the other, so its longest Docker files
 * started last, with one worker left idle behind them). Durations of an earlier run when Vitest kept them, else
 * sizes weighed by tier.
 */
export default class HeaviestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const weight = (spec: TestSpecification) => {
      const key = `${spec.project.name}:${relative(root, spec.moduleId)}`;
      const timed = this.ctx.cache.getFileTestResults(key);
      if (timed) return timed.duration / 1000;
      return (statSync(spec.moduleId).size / 1024) * (SECONDS_PER_KB[spec.project.name] ?? 1);
    };
    const weights = new Map(files.map((spec) => [spec, weight(spec)]));
    const unitFirst = (spec: TestSpecification) => (spec.project.name === "unit" ? 0 : 1);
    return [...files].sort(
      (a, b) =>
        a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder ||
        unitFirst(a) - unitFirst(b) ||
        weights.get(b)! - weights.get(a)!,
    );
  }
}
