import { appendFileSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { StringDecoder } from "node:string_decoder";
import type { SandboxLogLine } from "../protocol/sandbox-access.ts";
import { SANDBOX_LOG_FILE } from "../protocol/sandbox-log.ts";

/** The log file moves to `<file>.1` past this size: the log holds between one and two of these. */
export const LOG_ROTATE_BYTES = 4 << 20;
/** A line longer than this is cut into lines of this size, so one write holds a whole record. */
const MAX_LINE_CHARS = 16_384;

type Stream = SandboxLogLine["stream"];

/**
 * The sandbox's log as JSON lines (SandboxLogLine), in `dir`, rotated at LOG_ROTATE_BYTES: what PID 1's two
 * outputs carried, in the order their lines ended. The daemon serves it (`GET /svc/logs`, sandbox-log.ts), so the
 * API reads a sandbox's log over its link like everything else, on any engine.
 */
export function createLogWriter(dir: string, rotateBytes = LOG_ROTATE_BYTES) {
  const file = join(dir, SANDBOX_LOG_FILE);
  let size = (() => {
    try {
      return statSync(file).size;
    } catch {
      return 0;
    }
  })();
  const partial: Record<Stream, string> = { stdout: "", stderr: "" };
  const decoders: Record<Stream, StringDecoder> = {
    stdout: new StringDecoder("utf8"),
    stderr: new StringDecoder("utf8"),
  };

  function append(stream: Stream, lines: string[]): void {
    if (lines.length === 0) return;
    const text = lines.map((line) => `${JSON.stringify({ stream, line } satisfies SandboxLogLine)}\n`).join("");
    if (size > 0 && size + Buffer.byteLength(text) > rotateBytes) {
      renameSync(file, `${file}.1`);
      size = 0;
    }
    appendFileSync(file, text);
    size += Buffer.byteLength(text);
  }

  function cut(line: string): string[] {
    if (line.length <= MAX_LINE_CHARS) return [line];
    const pieces: string[] = [];
    for (let at = 0; at < line.length; at += MAX_LINE_CHARS) pieces.push(line.slice(at, at + MAX_LINE_CHARS));
    return pieces;
  }

  return {
    /** Output of one stream: whole lines are recorded, the rest waits for its newline. */
    write(stream: Stream, data: Buffer): void {
      const parts = (partial[stream] + decoders[stream].write(data)).split("\n");
      partial[stream] = parts.pop()!;
      const lines = parts.flatMap(cut);
      if (partial[stream].length > MAX_LINE_CHARS) {
        const long = cut(partial[stream]);
        partial[stream] = long.pop()!;
        lines.push(...long);
      }
      append(stream, lines);
    },
  };
}
