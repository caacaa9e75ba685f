import { describe, expect, it } from "vitest";
import { createKeyedMutex } from "./keyed-mutex.ts";

const tick = () => new Promise((r) => setTimeout(r, 5));

describe("createKeyedMutex", () => {
  it("runs one function at a time per key, in arrival order, and different keys at once", async () => {
    const withLock = createKeyedMutex();
    const events: string[] = [];
    const job = (key: string, n: number) =>
      withLock(key, async () => {
        events.push(`${key}${n} in`);
        await tick();
        events.push(`${key}${n} out`);
        return n;
      });
    const results = await Promise.all([job("a", 1), job("a", 2), job("b", 1), job("a", 3)]);
    expect(results).toEqual([1, 2, 1, 3]);
    expect(events.filter((e) => e.startsWith("a"))).toEqual(["a1 in", "a1 out", "a2 in", "a2 out", "a3 in", "a3 out"]);
    // b does not wait for a.
    expect(events.indexOf("b1 in")).toBeLessThan(events.indexOf("a1 out"));
  });

  it("rejects as the function does, and a failure does not block the key", async () => {
    const withLock = createKeyedMutex();
    const failed = withLock("a", async () => {
      await tick();
      throw new Error("boom");
    });
    const next = withLock("a", async () => "ran");
    await expect(failed).rejects.toThrow("boom");
    await expect(next).resolves.toBe("ran");
  });
});
