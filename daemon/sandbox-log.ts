import { once } from "node:events";
import { existsSync, watch } from "node:fs";
import { open, readFile, stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import type { LogsQuery } from "../protocol/sandbox-access.ts";
import { SANDBOX_LOG_FILE } from "../protocol/sandbox-log.ts";

/** How often a follower looks at the file besides the directory's change events (which an overlay may not give). */
const POLL_MS = 1000;
/** Log a follower has not taken yet, past which its stream is cut. */
const MAX_UNSENT_BYTES = 8 << 20;

async function linesOf(path: string): Promise<string[]> {
  try {
    return (await readFile(path, "utf8")).split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

async function inodeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).ino;
  } catch {
    return undefined;
  }
}

/** The bytes of `path` from `from` to its end. */
async function readFrom(path: string, from: number): Promise<string> {
  const handle = await open(path, "r").catch(() => undefined);
  if (!handle) return "";
  try {
    const { size } = await handle.stat();
    if (size <= from) return "";
    const buffer = Buffer.alloc(size - from);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, from);
    return buffer.subarray(0, bytesRead).toString("utf8");
  } finally {
    await handle.close();
  }
}

/**
 * The daemon's side of the sandbox's log (the keeper writes it: log-keeper.ts): its last lines, and the lines
 * written after them. Lines are served as the keeper wrote them, JSON lines of SandboxLogLine.
 */
export function createSandboxLogReader(dir: string) {
  const file = join(dir, SANDBOX_LOG_FILE);
  const previous = `${file}.1`;

  return {
    /** False where no keeper runs (a daemon outside a sandbox, an image that predates it). */
    kept: () => existsSync(file),

    /** The last `tail` lines (all of them without a count), and where the current file ended when read. */
    async tail(tail: number | undefined): Promise<{ lines: string[]; ino: number | undefined; offset: number }> {
      const ino = await inodeOf(file);
      const current = await readFrom(file, 0);
      const lines = [...(await linesOf(previous)), ...current.split("\n").filter(Boolean)];
      const offset = Buffer.byteLength(current.slice(0, current.lastIndexOf("\n") + 1));
      return { lines: tail === undefined ? lines : lines.slice(Math.max(0, lines.length - tail)), ino, offset };
    },

    /**
     * Lines written after `from`, handed to `emit` as they come, until `signal`. A rotation moves the file to `.1`:
     * its rest is read there before the new file from its start.
     */
    follow(from: { ino: number | undefined; offset: number }, emit: (lines: string[]) => void, signal: AbortSignal) {
      let { ino, offset } = from;
      let partial = "";
      let reading: Promise<void> | undefined;
      let again = false;
      const take = (text: string) => {
        const parts = (partial + text).split("\n");
        partial = parts.pop()!;
        if (parts.length) emit(parts.filter(Boolean));
      };
      async function read(): Promise<void> {
        const now = await inodeOf(file);
        if (ino !== undefined && now !== ino) {
          if ((await inodeOf(previous)) === ino) take(await readFrom(previous, offset));
          partial = "";
          ino = now;
          offset = 0;
        }
        ino ??= now;
        const text = await readFrom(file, offset);
        offset += Buffer.byteLength(text);
        take(text);
      }
      const wake = () => {
        if (signal.aborted) return;
        if (reading) {
          again = true;
          return;
        }
        reading = read()
          .catch(() => {})
          .finally(() => {
            reading = undefined;
            if (again) {
              again = false;
              wake();
            }
          });
      };
      const watcher = watch(dir, wake);
      watcher.on("error", () => {});
      const poll = setInterval(wake, POLL_MS);
      signal.addEventListener(
        "abort",
        () => {
          watcher.close();
          clearInterval(poll);
        },
        { once: true },
      );
      wake();
    },
  };
}

export type SandboxLogReader = ReturnType<typeof createSandboxLogReader>;

/** `GET /svc/logs`: the last lines as JSON lines, then (`follow=1`) every new one until the client leaves. */
export async function serveSandboxLog(
  req: IncomingMessage,
  res: ServerResponse,
  reader: SandboxLogReader,
  query: LogsQuery,
): Promise<void> {
  const start = await reader.tail(query.tail);
  const follow = query.follow === "1";
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  const write = (lines: string[]) => {
    if (lines.length > 0) res.write(`${lines.join("\n")}\n`);
    // A reader this far behind is gone or stuck: end its stream rather than hold the sandbox's log in memory.
    if (res.writableLength > MAX_UNSENT_BYTES) res.destroy();
  };
  write(start.lines);
  if (!follow) return void res.end();
  const leave = new AbortController();
  res.on("close", () => leave.abort());
  req.on("close", () => leave.abort());
  reader.follow(start, write, leave.signal);
  await once(leave.signal, "abort");
}
