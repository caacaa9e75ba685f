import { describe, expect, it } from "vitest";
import type { TranscriptEntry, TranscriptTool } from "../protocol/transcript.ts";
import { formatTranscript, localTime, toolInputLine } from "./transcript-format.ts";

let seq = 0;
const entry = (role: TranscriptEntry["role"], text: string, tool: TranscriptTool | null = null): TranscriptEntry => {
  seq += 1;
  return { seq, rev: seq, role, text, at: `2025-01-02T12:03:0${seq % 10}.000Z`, conversation: "c1", tool };
};
const tool = (over: Partial<TranscriptTool> = {}): TranscriptTool => ({
  name: "bash",
  status: "completed",
  input: { command: "npm test", description: "run the tests" },
  output: "ok\n",
  output_truncated: false,
  ...over,
});
/** The time as the entry wrote it: the format is tested, not this machine's time zone. */
const time = (at: string) => at.slice(11, 19);

describe("formatTranscript: a session's conversation for a person", () => {
  it("prints each entry oldest first: who and when, then its text indented", () => {
    seq = 0;
    const out = formatTranscript(
      [
        entry("user", "Add a health endpoint"),
        entry("assistant", "I'll add it.\n\nFirst, **the route**:\n"),
        entry("tool", "", tool()),
      ],
      { time },
    );
    expect(out).toBe(
      [
        "you  12:03:01",
        "  Add a health endpoint",
        "agent  12:03:02",
        "  I'll add it.",
        "",
        "  First, **the route**:",
        "tool bash  12:03:03  completed",
        "  $ npm test",
        "  ok",
        "",
      ].join("\n"),
    );
  });

  it("shows the first 20 lines of a tool's output, counts the rest and says when it was cut", () => {
    seq = 0;
    const output = Array.from({ length: 25 }, (_, i) => `line ${i + 1}`).join("\n");
    const out = formatTranscript([entry("tool", "", tool({ status: "error", output, output_truncated: true }))], {
      time,
    });
    const lines = out.trimEnd().split("\n");
    expect(lines[0]).toBe("tool bash  12:03:01  error");
    expect(lines.slice(2, 22)).toEqual(Array.from({ length: 20 }, (_, i) => `  line ${i + 1}`));
    expect(lines.slice(22)).toEqual(["  … 5 more lines", "  (output cut at 64 KiB)"]);
  });

  it("prints a running tool, with no output yet, as its call alone", () => {
    seq = 0;
    const out = formatTranscript([entry("tool", "", tool({ status: "running", output: null }))], { time });
    expect(out).toBe("tool bash  12:03:01  running\n  $ npm test\n");
  });

  it("drops terminal escapes from what the agent and its tools wrote", () => {
    seq = 0;
    const out = formatTranscript(
      [entry("assistant", "\u001b]0;owned\u0007hi"), entry("tool", "", tool({ output: "\u001b[31mred\u001b[0m" }))],
      { time },
    );
    expect(out).not.toContain("\u001b");
    expect(out).toContain("  hi\n");
    expect(out).toContain("  red\n");
  });

  it("prints nothing for no entries", () => {
    expect(formatTranscript([])).toBe("");
  });
});

describe("toolInputLine", () => {
  it("is a shell tool's command, else the input as compact JSON, on one line and cut when long", () => {
    expect(toolInputLine(tool())).toBe("npm test");
    expect(toolInputLine(tool({ name: "read", input: { filePath: "a.ts" } }))).toBe('{"filePath":"a.ts"}');
    expect(toolInputLine(tool({ input: { command: "cd app\n  npm test" } }))).toBe("cd app ⏎ npm test");
    const long = toolInputLine(tool({ input: { command: "x".repeat(500) } }));
    expect(long).toBe(`${"x".repeat(200)}…`);
  });
});

describe("localTime", () => {
  it("is HH:MM:SS in this machine's time zone", () => {
    expect(localTime(new Date(2025, 0, 2, 3, 4, 5).toISOString())).toBe("03:04:05");
  });
});
