import { describe, expect, it } from "vitest";
import { jsonLogLine, readableLogLine } from "./log-format.ts";

const at = (h: number, m: number, s: number) => new Date(2026, 10, 23, h, m, s).getTime();

describe("API log lines for people and programs", () => {
  it("prints pino's JSON as HH:MM:SS LEVEL msg key=value, nested values as JSON", () => {
    const line = JSON.stringify({
      level: 40,
      time: at(9, 5, 7),
      pid: 1,
      hostname: "vm",
      msg: "trigger reload failed",
      project: "p1",
      error: "a b",
      res: { statusCode: 500 },
    });
    expect(readableLogLine(line, false)).toBe(
      '09:05:07 WARN  trigger reload failed project=p1 error="a b" res={"statusCode":500}',
    );
    expect(readableLogLine(line, true)).toBe(
      '\x1b[2m09:05:07\x1b[0m \x1b[33mWARN \x1b[0m trigger reload failed \x1b[2mproject=p1 error="a b" res={"statusCode":500}\x1b[0m',
    );
  });

  it("keeps other lines (a crash's stack trace) as they are, and wraps them for --json", () => {
    expect(readableLogLine("    at main (file.js:1:1)", false)).toBe("    at main (file.js:1:1)");
    expect(readableLogLine("{not json", false)).toBe("{not json");
    expect(JSON.parse(jsonLogLine("    at main (file.js:1:1)"))).toEqual({ msg: "    at main (file.js:1:1)" });
    expect(jsonLogLine('{"level":30,"msg":"x"}')).toBe('{"level":30,"msg":"x"}');
  });
});
