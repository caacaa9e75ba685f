import { spawn } from "node:child_process";
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
