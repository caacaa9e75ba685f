import type autocannon from "autocannon";

export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * `before` runs ahead of each timed run, untimed (a warm pool refilling); `after` gets each run's result, untimed
 * too (removing the session a run started).
 */
export async function timeRuns<T>(
  runs: number,
  fn: () => Promise<T>,
  before: () => Promise<unknown> = async () => {},
  after: (result: T) => Promise<unknown> = async () => {},
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    await before();
    const start = performance.now();
    const result = await fn();
    samples.push(performance.now() - start);
    await after(result);
  }
  return samples;
}

export const median = (samples: number[]) => percentile(samples, 50);

export const ms = (n: number) => (n < 1 ? n.toFixed(3) : n < 10 ? n.toFixed(2) : n.toFixed(0));

/** Requests per second over all rounds of a load test, and the latencies of the median round. */
export function roundsSummary(rounds: autocannon.Result[]) {
  const rps = rounds.reduce((n, r) => n + r.requests.total, 0) / rounds.reduce((s, r) => s + r.duration, 0);
  const median = [...rounds].sort((a, b) => a.latency.p50 - b.latency.p50)[Math.floor(rounds.length / 2)]!;
  return { rps, p50: median.latency.p50, p99: median.latency.p99 };
}
