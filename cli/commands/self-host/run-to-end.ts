import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { CliError } from "../../errors.ts";

/**
 * Runs a program (docker, docker compose) to its end: its stdout and stderr together are returned, and with
 * `onLine` seen line by line as they come (a build's steps). `missing` is the error when the program is not there.
 */
export function runToEnd(
  command: string,
  args: string[],
  options: { env: Record<string, string | undefined>; onLine?: (line: string) => void; missing: string },
): Promise<{ code: number; output: string }> {
  const { onLine } = options;
  return new Promise((done, fail) => {
    const child = spawn(command, args, { env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    const chunks: string[] = [];
    let partial = "";
    const take = (data: Buffer) => {
      const text = data.toString("utf8");
      chunks.push(text);
      if (!onLine) return;
      const lines = (partial + text).split(/\r?\n|\r/);
      partial = lines.pop() ?? "";
      for (const line of lines) onLine(line);
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", (err) =>
      fail((err as NodeJS.ErrnoException).code === "ENOENT" ? new CliError(options.missing) : err),
    );
    child.on("close", (code) => {
      if (onLine && partial) onLine(partial);
      done({ code: code ?? 1, output: chunks.join("") });
    });
  });
}

/**
 * Runs a program with a file as its stdin (`input`) and another as its stdout (`output`): binary-safe and
 * unbuffered, for a database dump in or out of its container. Its stderr is returned.
 */
export function runWithFiles(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
  files: { input?: string; output?: string },
): Promise<{ code: number; stderr: string }> {
  return new Promise((done, fail) => {
    const input = files.input ? openSync(files.input, "r") : "ignore";
    const output = files.output ? openSync(files.output, "w", 0o600) : "ignore";
    const close = () => {
      if (typeof input === "number") closeSync(input);
      if (typeof output === "number") closeSync(output);
    };
    const child = spawn(command, args, { env, stdio: [input, output, "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (data: Buffer) => {
      stderr += data.toString("utf8");
    });
    child.on("error", (err) => {
      close();
      fail(err);
    });
    child.on("close", (code) => {
      close();
      done({ code: code ?? 1, stderr });
    });
  });
}
