import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogWriter } from "./log-writer.ts";
import { createSandboxLogReader } from "./sandbox-log.ts";

const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-sandbox-log-"));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const parsed = (lines: string[]) => lines.map((l) => JSON.parse(l));
const text = (s: string) => Buffer.from(s, "utf8");

/** Lines a follower was handed, once `count` of them came (or what came within a second). */
async function collect(into: string[], count: number): Promise<string[]> {
  for (let i = 0; i < 100 && into.length < count; i++) await new Promise((r) => setTimeout(r, 10));
  return into;
}

describe("the sandbox's log: the keeper's writer and the daemon's reader", () => {
  it("records whole lines of each stream in the order they end; a line waits for its newline", async () => {
    const dir = freshDir();
    const writer = createLogWriter(dir);
    writer.write("stdout", text("one\ntw"));
    writer.write("stderr", text("oops\n"));
    writer.write("stdout", text("o\n"));
    // A character split across two writes stays whole.
    const e = text("é\n");
    writer.write("stdout", e.subarray(0, 1));
    writer.write("stdout", e.subarray(1));
    const { lines } = await createSandboxLogReader(dir).tail(undefined);
    expect(parsed(lines)).toEqual([
      { stream: "stdout", line: "one" },
      { stream: "stderr", line: "oops" },
      { stream: "stdout", line: "two" },
      { stream: "stdout", line: "é" },
    ]);
  });

  it("cuts a line longer than 16384 characters, even before its newline comes", async () => {
    const dir = freshDir();
    createLogWriter(dir).write("stdout", text("x".repeat(40_000)));
    const { lines } = await createSandboxLogReader(dir).tail(undefined);
    expect(parsed(lines).map((l) => l.line.length)).toEqual([16_384, 16_384]);
  });

  it("rotates past its size into .1, and the tail reads across both files", async () => {
    const dir = freshDir();
    const writer = createLogWriter(dir, 200);
    for (let i = 0; i < 12; i++) writer.write("stdout", text(`line ${i}\n`));
    expect(readFileSync(join(dir, "log.jsonl.1"), "utf8")).toContain("line");
    const reader = createSandboxLogReader(dir);
    expect(parsed((await reader.tail(3)).lines).map((l) => l.line)).toEqual(["line 9", "line 10", "line 11"]);
    // Only two files are kept: the oldest lines are gone, the newest all there in order.
    const all = parsed((await reader.tail(undefined)).lines).map((l) => l.line);
    expect(all.at(-1)).toBe("line 11");
    expect(all).toEqual([...all].sort((a, b) => Number(a.split(" ")[1]) - Number(b.split(" ")[1])));
    expect(all.length).toBeLessThan(12);
  });

  it("follows new lines after the tail, through a rotation, without losing or repeating one", async () => {
    const dir = freshDir();
    const writer = createLogWriter(dir, 300);
    writer.write("stdout", text("before\n"));
    const reader = createSandboxLogReader(dir);
    const start = await reader.tail(undefined);
    expect(parsed(start.lines).map((l) => l.line)).toEqual(["before"]);
    const got: string[] = [];
    const stop = new AbortController();
    reader.follow(start, (lines) => got.push(...lines), stop.signal);
    // Bursts of four lines, a rotation within some of them: the follower takes the rest of the moved file first.
    for (let i = 0; i < 20; i++) {
      writer.write(i % 2 ? "stderr" : "stdout", text(`after ${i}\n`));
      if (i % 4 === 3) await new Promise((r) => setTimeout(r, 30));
    }
    await collect(got, 20);
    stop.abort();
    expect(parsed(got).map((l) => l.line)).toEqual(Array.from({ length: 20 }, (_, i) => `after ${i}`));
    writer.write("stdout", text("unheard\n"));
    await new Promise((r) => setTimeout(r, 50));
    expect(got).toHaveLength(20);
  });

  it("says there is no log where no keeper ever wrote one", () => {
    expect(createSandboxLogReader(freshDir()).kept()).toBe(false);
  });
});
