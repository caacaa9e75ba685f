import { z } from "zod";

/**
 * `svc sessions logs|exec|shell`: the wire formats of reading a sandbox's log and running a command in it.
 *
 * Logs: `GET /v1/projects/{id}/sessions/{sid}/logs[?follow=1&tail=N]` answers JSON lines, one SandboxLogLine each.
 *
 * Exec: `GET /v1/projects/{id}/sessions/{sid}/exec?cmd=…&cmd=…[&tty=1&stdin=1&cols=&rows=]` with
 * `Connection: Upgrade` and `Upgrade: svc-exec`. Refusals answer as any other call does (JSON error, same codes);
 * once the command runs the API answers 101 and the connection carries ExecFrames both ways until the EXIT frame.
 * An upgrade, not a long request body: a shell outlives the server's limit on how long a request may take to
 * arrive, and one connection keeps stdin, output and resizes on the API process that holds the command.
 */

export const SandboxLogLine = z.object({ stream: z.enum(["stdout", "stderr"]), line: z.string() });
export type SandboxLogLine = z.infer<typeof SandboxLogLine>;

export const LogsQuery = z
  .object({
    follow: z.enum(["0", "1"]).default("0"),
    tail: z.coerce.number().int().min(0).max(100_000).optional(),
  })
  .strict();
export type LogsQuery = z.infer<typeof LogsQuery>;

export const EXEC_UPGRADE = "svc-exec";

const flag = z.enum(["0", "1"]).default("0");

/** A command and its arguments, as an exec runs them: the API's query and the daemon's first message alike. */
export const ExecArgv = z
  .array(
    z
      .string()
      .max(100_000)
      .refine((s) => !s.includes("\0"), "must not hold a NUL"),
  )
  .min(1)
  .max(1000);
const size = z.coerce.number().int().min(1).max(1000).optional();

/** The command line and terminal of an exec; `cmd` repeats once per argument. */
export const ExecQuery = z
  .object({
    cmd: z.preprocess((v) => (typeof v === "string" ? [v] : v), ExecArgv),
    tty: flag,
    stdin: flag,
    cols: size,
    rows: size,
    /** The client's TERM, for a tty. */
    term: z
      .string()
      .regex(/^[\w.+-]{1,64}$/)
      .optional(),
  })
  .strict();
export type ExecQuery = z.infer<typeof ExecQuery>;

/** Frame kinds: the client sends STDIN, STDIN_EOF and RESIZE; the API sends STDOUT, STDERR, EXIT and ERROR. */
export const Frame = {
  STDIN: 1,
  STDIN_EOF: 2,
  /** JSON ExecResize. */
  RESIZE: 3,
  STDOUT: 4,
  STDERR: 5,
  /** JSON ExecExit; the last frame. */
  EXIT: 6,
  /** JSON ErrorBody: the command could not be followed to its end; the last frame. */
  ERROR: 7,
} as const;

export const ExecResize = z.object({
  cols: z.number().int().min(1).max(1000),
  rows: z.number().int().min(1).max(1000),
});
export const ExecExit = z.object({ code: z.number().int() });

const HEADER = 5;
/** Larger payloads are split: a frame's length fits any reader's buffer. */
export const MAX_FRAME = 64 * 1024;

/** Frames of one kind: kind (1 byte), payload length (4 bytes, big-endian), payload; split at MAX_FRAME. */
export function encodeFrame(kind: number, payload: Buffer | string = Buffer.alloc(0)): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const parts: Buffer[] = [];
  for (let at = 0; at === 0 || at < body.length; at += MAX_FRAME) {
    const piece = body.subarray(at, at + MAX_FRAME);
    const header = Buffer.alloc(HEADER);
    header.writeUInt8(kind, 0);
    header.writeUInt32BE(piece.length, 1);
    parts.push(header, piece);
  }
  return Buffer.concat(parts);
}

/** Splits a byte stream into frames as chunks arrive; throws on a frame larger than MAX_FRAME. */
export function createFrameReader(): (chunk: Buffer) => { kind: number; payload: Buffer }[] {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    const frames: { kind: number; payload: Buffer }[] = [];
    while (pending.length >= HEADER) {
      const length = pending.readUInt32BE(1);
      if (length > MAX_FRAME) throw new Error(`exec frame of ${length} bytes exceeds ${MAX_FRAME}`);
      if (pending.length < HEADER + length) break;
      frames.push({ kind: pending.readUInt8(0), payload: pending.subarray(HEADER, HEADER + length) });
      pending = pending.subarray(HEADER + length);
    }
    return frames;
  };
}
