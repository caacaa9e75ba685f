import type { IncomingMessage } from "node:http";
import { Writable } from "node:stream";
import { type RawData, WebSocket } from "ws";
import type { ExecRequest } from "../../orchestrator/sandbox/access.ts";
import type { SandboxExec } from "../../orchestrator/sandbox/driver.ts";
import {
  DAEMON_EXEC_MAX_MESSAGE,
  DAEMON_EXEC_PATH,
  type DaemonExecControl,
  DaemonExecReply,
  type DaemonExecSpec,
  ExecStream,
  execData,
} from "../../protocol/daemon-exec.ts";
import { apiError } from "../errors.ts";

const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Output held for a reader that is behind before the socket stops reading (and the daemon, then the command, wait). */
const QUEUE_HIGH = 1 << 20;

type Output = { stream: "stdout" | "stderr"; data: Buffer };

/** The daemon's refusal of the upgrade, as the API says it; a daemon without the route predates exec over it. */
async function refusal(res: IncomingMessage): Promise<Error> {
  let text = "";
  for await (const chunk of res) text += chunk;
  let message = text.slice(0, 200);
  try {
    message = (JSON.parse(text) as { error?: string }).error ?? message;
  } catch {}
  const hint =
    res.statusCode === 404
      ? "; its daemon predates running commands, a restart ('svc sessions restart') updates it"
      : "";
  return apiError("SANDBOX_UNREACHABLE", `the session's sandbox answered ${res.statusCode}: ${message}${hint}`);
}

function opened(ws: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("unexpected-response", (_req, res) => void refusal(res).then(reject, reject));
    // Kept for the socket's life: a later error closes it, and the output says the connection broke.
    ws.on("error", (err) =>
      reject(apiError("SANDBOX_UNREACHABLE", `the session's sandbox did not answer: ${err.message}`)),
    );
  });
}

/**
 * A command in the sandbox run by its daemon (`GET /svc/exec`, protocol/daemon-exec.ts) rather than by the engine:
 * what reaches a sandbox over its link (SVC_SANDBOX_LINK=dial-out), a Swarm task on any node included. The same
 * SandboxExec the engine's exec gives, so the exec route and the CLI do not tell them apart. The daemon applies the
 * session's environment itself and runs in its own workspace.
 */
export async function daemonExec(
  target: { url: string; serviceKey: string },
  request: ExecRequest,
): Promise<SandboxExec> {
  const ws = new WebSocket(`${target.url.replace(/^http/i, "ws").replace(/\/+$/, "")}${DAEMON_EXEC_PATH}`, {
    headers: { authorization: `Bearer ${target.serviceKey}` },
    perMessageDeflate: false,
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
    maxPayload: DAEMON_EXEC_MAX_MESSAGE,
  });
  await opened(ws);
  const send = (message: DaemonExecControl | DaemonExecSpec) => ws.send(JSON.stringify(message));
  send({
    cmd: request.cmd,
    tty: request.tty,
    stdin: request.stdin,
    cols: request.cols,
    rows: request.rows,
    env: request.tty ? [`TERM=${request.term ?? "xterm"}`] : [],
  });

  const queue: Output[] = [];
  let queued = 0;
  let code: number | undefined;
  let failure: Error | undefined;
  let closed = false;
  let left = false;
  let wake = () => {};
  ws.on("message", (data: RawData, binary) => {
    const bytes = data as Buffer;
    if (binary) {
      const stream = bytes[0] === ExecStream.STDOUT ? "stdout" : bytes[0] === ExecStream.STDERR ? "stderr" : undefined;
      if (stream) queue.push({ stream, data: bytes.subarray(1) });
      queued += bytes.length;
      if (queued >= QUEUE_HIGH) ws.pause();
    } else {
      let json: unknown;
      try {
        json = JSON.parse(String(bytes));
      } catch {}
      const message = DaemonExecReply.safeParse(json);
      if (message.success && message.data.type === "exit") code = message.data.code;
      if (message.success && message.data.type === "error") failure = new Error(message.data.message);
    }
    wake();
  });
  ws.on("close", (status) => {
    closed = true;
    if (code === undefined && !failure && !left)
      failure = new Error(`the sandbox's daemon closed the command's connection (${status}) before it exited`);
    wake();
  });

  async function* output(): AsyncGenerator<Output> {
    for (;;) {
      const next = queue.shift();
      if (next) {
        queued -= next.data.length + 1;
        if (queued < QUEUE_HIGH / 2) ws.resume();
        yield next;
        continue;
      }
      if (failure) throw failure;
      if (code !== undefined || closed) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  }

  // Data in order, then its end: each write done once the socket has taken it, so the relay's backpressure holds.
  const stdin = request.stdin
    ? new Writable({
        write(chunk: Buffer, _encoding, done) {
          ws.send(execData(ExecStream.STDIN, chunk), (err) => done(err ?? undefined));
        },
        final(done) {
          ws.send(JSON.stringify({ type: "stdin-end" } satisfies DaemonExecControl), (err) => done(err ?? undefined));
        },
      })
    : null;
  // A command that is over takes no more input: writing after that is no error of the caller's.
  stdin?.on("error", () => {});

  return {
    stdin,
    output: output(),
    async resize(cols, rows) {
      if (ws.readyState === WebSocket.OPEN) send({ type: "resize", cols, rows });
    },
    async exitCode() {
      return code ?? -1;
    },
    // The daemon hangs the command up when its connection goes (exec-socket.ts); its output just ends here.
    close() {
      left = true;
      ws.terminate();
    },
  };
}
