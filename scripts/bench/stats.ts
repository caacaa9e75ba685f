export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** `before` runs ahead of each timed run, untimed (a warm pool refilling). */
export async function timeRuns(
  runs: number,
  fn: () => Promise<unknown>,
  before: () => Promise<unknown> = async () => {},
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    await before();
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return samples;
}

export const ms = (n: number) => (n < 1 ? n.toFixed(3) : n < 10 ? n.toFixed(2) : n.toFixed(0));
