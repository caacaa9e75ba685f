import { StringDecoder } from "node:string_decoder";
import type { SandboxLogLine } from "./sandbox-access.ts";

// The Docker engine's framing of a container's output (logs, exec without a tty), read by the sandbox drivers and by
// the CLI's compose mode, which reads its stack's logs from the engine.

/** A piece of one stream of a container's output. */
export type Chunk = { stream: "stdout" | "stderr"; data: Buffer };

/** The engine's stream of a command without a tty: 8-byte headers (stream, 0, 0, 0, length), then the bytes. */
export async function* demux(source: AsyncIterable<Buffer> | Iterable<Buffer>): AsyncIterable<Chunk> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of source) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4);
      if (pending.length < 8 + size) break;
      yield { stream: pending[0] === 2 ? "stderr" : "stdout", data: pending.subarray(8, 8 + size) };
      pending = pending.subarray(8 + size);
    }
  }
}

/** Chunks as lines of each stream; a last line without its newline comes at the end. */
export async function* linesOf(source: AsyncIterable<Chunk>): AsyncIterable<SandboxLogLine> {
  const partial = { stdout: "", stderr: "" };
  const decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
  for await (const { stream, data } of source) {
    const parts = (partial[stream] + decoders[stream].write(data)).split("\n");
    partial[stream] = parts.pop()!;
    for (const line of parts) yield { stream, line };
  }
  for (const stream of ["stdout", "stderr"] as const) {
    const rest = partial[stream] + decoders[stream].end();
    if (rest) yield { stream, line: rest };
  }
}
