import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { rotateIfLarge } from "./log-rotation.ts";

const MODULE = new URL("./log-rotation.ts", import.meta.url).pathname;

/** A process whose stdout appends to `path`, as `svc self-host start` gives the API; writes each line it is sent. */
function appendingWriter(path: string) {
  const child = spawn(
    process.execPath,
    ["-e", "process.stdin.on('data', (d) => process.stdout.write(d)); process.stdin.on('end', () => process.exit(0))"],
    { stdio: ["pipe", openSync(path, "a"), "inherit"] },
  );
  const stdin = child.stdin!;
  return {
    write: (text: string) =>
      new Promise<void>((resolve) => {
        stdin.write(text);
        // The child writes synchronously to a file: wait until the bytes are in it.
        const until = () => (readFileSync(path, "utf8").includes(text) ? resolve() : setTimeout(until, 5));
        until();
      }),
    end: () =>
      new Promise<void>((resolve) => {
        child.on("exit", () => resolve());
        stdin.end();
      }),
  };
}

describe("the API's log file rotation", () => {
  it("keeps at most three files; the writer's next line starts the emptied log, nothing of it in the copies", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-log-"));
    const log = join(dir, "api.log");
    writeFileSync(log, "");
    const writer = appendingWriter(log);
    const rounds = ["first", "second", "third", "fourth"];
    for (const round of rounds) {
      await writer.write(`${round} ${"x".repeat(100)}\n`);
      expect(rotateIfLarge(log, 100, 3)).toBe(true);
      expect(readFileSync(log, "utf8")).toBe("");
    }
    await writer.write("after\n");
    await writer.end();
    expect(rotateIfLarge(log, 100, 3)).toBe(false);

    // A log that was truncated under an append-mode writer holds only what came after, with no hole of zeros.
    expect(readFileSync(log, "utf8")).toBe("after\n");
    expect(readdirSync(dir).sort()).toEqual(["api.log", "api.log.1", "api.log.2"]);
    expect(readFileSync(`${log}.1`, "utf8")).toMatch(/^fourth /);
    expect(readFileSync(`${log}.2`, "utf8")).toMatch(/^third /);
  });

  it("finds the file the process's stdout appends to, and none for a pipe", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-log-"));
    const log = join(dir, "api.log");
    const probe = (stdout: "pipe" | number) =>
      spawnSync(
        process.execPath,
        ["--import", "tsx", "-e", `import(${JSON.stringify(MODULE)}).then((m) => console.error(m.stdoutFile()))`],
        { stdio: ["ignore", stdout, "pipe"], encoding: "utf8" },
      ).stderr.trim();
    expect(probe(openSync(log, "a"))).toBe(log);
    expect(probe("pipe")).toBe("undefined");
  });

  it("leaves a log under the limit, or none at all, alone", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-log-"));
    expect(rotateIfLarge(join(dir, "api.log"), 100)).toBe(false);
    writeFileSync(join(dir, "api.log"), "short\n");
    expect(rotateIfLarge(join(dir, "api.log"), 100)).toBe(false);
    expect(readdirSync(dir)).toEqual(["api.log"]);
  });
});
