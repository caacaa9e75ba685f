import { SandboxLogLine } from "../protocol/sandbox-access.ts";
import { plainText } from "../protocol/terminal-text.ts";
import type { Context } from "./context.ts";

/**
 * Prints a container's log from a JSON-lines endpoint (`svc sessions logs`, `svc apps logs`): each line as it came
 * (plain text off a terminal), or `{stream, line}` objects with `json`; Ctrl-C ends a follow as the normal way out.
 */
export async function printLogLines(
  ctx: Context,
  path: string,
  opts: { follow?: boolean; tail?: number; json?: boolean },
): Promise<void> {
  const stop = new AbortController();
  process.once("SIGINT", () => stop.abort());
  const query = {
    follow: opts.follow ? "1" : undefined,
    tail: opts.tail === undefined ? undefined : String(opts.tail),
  };
  const plain = !process.stdout.isTTY;
  for await (const value of ctx.client.jsonLines(path, query, stop.signal)) {
    const entry = SandboxLogLine.parse(value);
    const line = plain ? plainText(entry.line) : entry.line;
    process.stdout.write(opts.json ? `${JSON.stringify({ stream: entry.stream, line })}\n` : `${line}\n`);
  }
}
