import { z } from "zod";
import { ExecArgv } from "./sandbox-access.ts";

/**
 * A command run by the sandbox's daemon (issue 33): the API's way into a sandbox that the engine cannot exec into
 * (a Swarm task on another node), over the daemon's own connection.
 *
 * `GET /svc/exec` upgraded to a WebSocket, the sandbox service key as the bearer. The API's first message is a JSON
 * DaemonExecSpec; then binary messages carry data, their first byte naming the stream (ExecStream), and text
 * messages carry JSON control: the API sends DaemonExecControl, the daemon DaemonExecReply, `exit` being its last.
 */
export const DAEMON_EXEC_PATH = "/svc/exec";

export const ExecStream = { STDIN: 0, STDOUT: 1, STDERR: 2 } as const;

/** Bounds a data message's payload: pipes hand over at most 64 KiB at a time. */
export const DAEMON_EXEC_MAX_MESSAGE = 1 << 20;

const size = z.number().int().min(1).max(1000);

/** What to run: the engine's ExecSpec (orchestrator/sandbox/driver.ts), the working directory the workspace's. */
export const DaemonExecSpec = z
  .object({
    cmd: ExecArgv,
    tty: z.boolean(),
    stdin: z.boolean(),
    /** Absent: the daemon's workspace, which only the daemon knows for sure (a test's runs outside a container). */
    workingDir: z.string().startsWith("/").optional(),
    /** `NAME=value` over the sandbox's environment and its session's (the engine's exec adds them the same way). */
    env: z
      .array(z.string().regex(/^[^=\0]+=[^\0]*$/, "must be NAME=value"))
      .max(1000)
      .default([]),
    cols: size.optional(),
    rows: size.optional(),
  })
  .strict();
export type DaemonExecSpec = z.infer<typeof DaemonExecSpec>;

export const DaemonExecControl = z.discriminatedUnion("type", [
  z.object({ type: z.literal("resize"), cols: size, rows: size }),
  z.object({ type: z.literal("stdin-end") }),
]);
export type DaemonExecControl = z.infer<typeof DaemonExecControl>;

export const DaemonExecReply = z.discriminatedUnion("type", [
  z.object({ type: z.literal("exit"), code: z.number().int() }),
  /** The spec was refused: nothing ran. */
  z.object({ type: z.literal("error"), message: z.string() }),
]);
export type DaemonExecReply = z.infer<typeof DaemonExecReply>;

/** A data message: the stream's tag, then its bytes. */
export function execData(stream: number, data: Buffer): Buffer {
  return Buffer.concat([Buffer.of(stream), data]);
}
