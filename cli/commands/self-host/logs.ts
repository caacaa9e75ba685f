import { watch } from "node:fs";
import { open, stat } from "node:fs/promises";
import { CliError } from "../../errors.ts";
import { useColor } from "../../table.ts";
import { jsonLogLine, readableLogLine } from "./log-format.ts";
import { tailFile } from "./process.ts";
import { selfHostPaths } from "./state.ts";

/** The embedded stack runs one service; the compose stack will add more. */
const SERVICES = ["api"] as const;

export type LogsOptions = { follow?: boolean; lines: number; json?: boolean };

/** Prints whole lines as they are appended (a rotated or truncated log starts over from its beginning). */
async function follow(path: string, from: number, print: (line: string) => void): Promise<never> {
  let offset = from;
  let partial = "";
  const handle = await open(path, "r");
  const pump = async () => {
    const { size } = await stat(path);
    if (size < offset) offset = 0;
    if (size === offset) return;
    const buf = Buffer.alloc(size - offset);
    await handle.read(buf, 0, buf.length, offset);
    offset = size;
    const lines = (partial + buf.toString("utf8")).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) print(line);
  };
  watch(path, () => void pump());
  return new Promise<never>(() => {});
}

export async function selfHostLogs(service: string | undefined, options: LogsOptions): Promise<void> {
  const name = service ?? "api";
  if (!(SERVICES as readonly string[]).includes(name)) {
    throw new CliError(`unknown service '${name}'; services: ${SERVICES.join(", ")}`);
  }
  const paths = selfHostPaths();
  const size = await stat(paths.apiLog).then(
    (s) => s.size,
    () => undefined,
  );
  if (size === undefined) throw new CliError(`no logs yet at ${paths.apiLog}; run 'svc self-host start' first`);
  const color = !options.json && useColor(undefined);
  const print = (line: string) =>
    process.stdout.write(`${options.json ? jsonLogLine(line) : readableLogLine(line, color)}\n`);
  const text = tailFile(paths.apiLog, options.lines);
  if (text) for (const line of text.split("\n")) print(line);
  if (options.follow) await follow(paths.apiLog, size, print);
}
