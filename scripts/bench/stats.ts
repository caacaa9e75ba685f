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

export const ms = (n: number) => (n < 1 ? n.toFixed(3) : n < 10 ? n.toFixed(2) : n.toFixed(0));
