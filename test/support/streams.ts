import { expect } from "vitest";

/**
 * Reads a streamed response to its end and checks five events written 150 ms apart arrived spread out, not in
 * one buffered burst at the end (what a proxy that buffers would do).
 */
export async function expectIncrementalEvents(res: Response): Promise<void> {
  const reader = res.body!.getReader();
  const arrivals: number[] = [];
  const start = Date.now();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    arrivals.push(Date.now() - start);
  }
  expect(text.match(/tick/g)).toHaveLength(5);
  expect(arrivals.length).toBeGreaterThanOrEqual(3);
  expect(arrivals[0]!).toBeLessThan(arrivals.at(-1)! - 300);
}
