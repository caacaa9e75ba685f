import type { Reporter, TestModule, Vitest } from "vitest/node";

type Span = { start: number; end: number };

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * A reporter beside the default one: once the run ends, one line per tier (Vitest project) with its files, its
 * tests, the summed duration of its files (tests and hooks, what the default reporter shows per file) and its wall
 * time, from its first file's start to its last file's end, both as offsets into the run (the gaps between groups
 * show), then the run's own span. The lines start with "tier" or "run", never with "Tests", so the default
 * summary's "Tests N passed" stays the last line .ci/run reads.
 */
export default class TierTimes implements Reporter {
  private vitest: Vitest | undefined;
  private spans = new Map<string, Span>();
  private runStart = performance.now();

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunStart(): void {
    this.spans.clear();
    this.runStart = performance.now();
  }

  onTestModuleQueued(module: TestModule): void {
    const now = performance.now();
    const span = this.spans.get(module.project.name);
    if (!span) this.spans.set(module.project.name, { start: now, end: now });
    else span.start = Math.min(span.start, now);
  }

  onTestModuleEnd(module: TestModule): void {
    const span = this.spans.get(module.project.name);
    if (span) span.end = Math.max(span.end, performance.now());
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const tiers = new Map<string, TestModule[]>();
    for (const module of modules) tiers.set(module.project.name, [...(tiers.get(module.project.name) ?? []), module]);
    if (tiers.size === 0) return;
    const width = Math.max(...[...tiers.keys()].map((name) => name.length));
    // In the configuration's order of projects (unit, api, docker), whatever order the files ended in.
    const order = this.vitest?.projects.map((project) => project.name) ?? [];
    const rank = (name: string) => (order.includes(name) ? order.indexOf(name) : order.length);
    const sorted = [...tiers].sort(([a], [b]) => rank(a) - rank(b));
    const lines = sorted.map(([name, files]) => {
      let tests = 0;
      let failed = 0;
      for (const file of files)
        for (const test of file.children.allTests()) {
          tests += 1;
          if (test.result().state === "failed") failed += 1;
        }
      const summed = files.reduce((total, file) => total + file.diagnostic().duration, 0);
      const span = this.spans.get(name);
      return (
        `tier ${name.padEnd(width)}  ${String(files.length).padStart(3)} files  ${String(tests).padStart(4)} tests` +
        `${failed > 0 ? ` (${failed} failed)` : ""}  summed ${seconds(summed).padStart(8)}  wall ${
          span
            ? `${seconds(span.end - span.start).padStart(8)}  (${seconds(span.start - this.runStart)} to ${seconds(span.end - this.runStart)})`
            : "?"
        }`
      );
    });
    const log = (line: string) => (this.vitest ? this.vitest.logger.log(line) : console.log(line));
    log("");
    for (const line of lines) log(line);
    log(`run ${seconds(performance.now() - this.runStart)} from its start to this line`);
  }
}
