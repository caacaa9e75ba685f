import type { IncomingMessage } from "node:http";
import type { Duplex, Readable } from "node:stream";
import { type RawData, type WebSocket, WebSocketServer } from "ws";
import {
  DAEMON_EXEC_MAX_MESSAGE,
  DaemonExecControl,
  type DaemonExecReply,
  DaemonExecSpec,
  ExecStream,
  execData,
} from "../protocol/daemon-exec.ts";
import { hasServiceKey } from "./auth.ts";
import { daemonError, rawErrorResponse } from "./errors.ts";
import { type Command, type ExecDeps, startCommand } from "./exec.ts";

/** The API sends the spec as soon as the socket opens: one that sends nothing is gone. */
const SPEC_WAIT_MS = 10_000;
/** Output waits while this much is queued for the API: a slow reader slows the command, never the daemon's memory. */
const HIGH_WATER = 1 << 20;

export type ExecSocketDeps = ExecDeps & {
  serviceKey: string;
  /** A person running commands, or typing into one, is using the sandbox: it is not idle. */
  touch(): void;
};

function parseJson(data: RawData): unknown {
  try {
    return JSON.parse(String(data));
  } catch {
    return undefined;
  }
}

const reply = (ws: WebSocket, message: DaemonExecReply) => ws.send(JSON.stringify(message));

/** Sends a stream's bytes tagged as `tag`, pausing it while the socket has much queued. */
function pump(ws: WebSocket, stream: Readable, tag: number): void {
  stream.on("data", (chunk: Buffer) => {
    ws.send(execData(tag, chunk), () => {
      if (ws.bufferedAmount < HIGH_WATER / 2) stream.resume();
    });
    if (ws.bufferedAmount >= HIGH_WATER) stream.pause();
  });
}

/** Carries one command's streams over the socket until it exits (the `exit` message, then a normal close). */
function serve(ws: WebSocket, command: Command, touch: () => void): void {
  let exited = false;
  pump(ws, command.stdout, ExecStream.STDOUT);
  pump(ws, command.stderr, ExecStream.STDERR);
  ws.on("message", (data: Buffer, binary) => {
    if (binary) {
      if (data[0] !== ExecStream.STDIN || !command.stdin) return;
      touch();
      if (!command.stdin.write(data.subarray(1))) {
        ws.pause();
        command.stdin.once("drain", () => ws.resume());
      }
      return;
    }
    const control = DaemonExecControl.safeParse(parseJson(data));
    if (!control.success) return;
    if (control.data.type === "stdin-end") command.stdin?.end();
    else void command.resize(control.data.cols, control.data.rows);
  });
  ws.on("close", () => {
    if (!exited) command.hangUp();
    // Output paused for a reader who left would keep the command's pipes, and its end, waiting forever.
    command.stdout.resume();
    command.stderr.resume();
  });
  void command.done.then(({ code, failure }) => {
    exited = true;
    if (failure) ws.send(execData(ExecStream.STDERR, Buffer.from(`${failure}\n`)));
    reply(ws, { type: "exit", code });
    ws.close(1000);
  });
}

/**
 * `GET /svc/exec` upgraded (protocol/daemon-exec.ts): authenticated as every other `/svc/*` call, by the service
 * key; then the first message says what to run, and the socket carries it until it exits.
 */
export function createExecUpgrade(deps: ExecSocketDeps) {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: DAEMON_EXEC_MAX_MESSAGE });
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on("error", () => socket.destroy());
    if (!hasServiceKey(req, deps.serviceKey)) {
      socket.end(rawErrorResponse(daemonError("UNAUTHENTICATED", "running commands needs the sandbox service key")));
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      deps.touch();
      ws.on("error", () => ws.terminate());
      const timer = setTimeout(() => ws.close(1008, "no exec spec"), SPEC_WAIT_MS);
      ws.once("message", (data, binary) => {
        clearTimeout(timer);
        const spec = binary ? undefined : DaemonExecSpec.safeParse(parseJson(data));
        if (!spec?.success) {
          const issue = spec?.error.issues[0];
          const why = issue ? `${issue.path.join(".") || "spec"}: ${issue.message}` : "the first message is not a spec";
          reply(ws, { type: "error", message: `exec refused: ${why}` });
          ws.close(1008);
          return;
        }
        serve(ws, startCommand(spec.data, deps), deps.touch);
      });
    });
  };
}
