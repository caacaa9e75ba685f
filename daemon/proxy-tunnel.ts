import { connect, type Socket } from "node:net";
import type { ContextCheck } from "./auth.ts";
import { type DaemonError, daemonError, rawErrorResponse } from "./errors.ts";
import type { ProxyTarget } from "./proxy-target.ts";

/** Node's own limit on a request head; a longer one goes to the full HTTP server, which answers 431. */
const MAX_HEAD = 16 * 1024;
const HEAD_END = Buffer.from("\r\n\r\n");
/** Like http.Server's headersTimeout: a client gets this long to send its first request head. */
const FIRST_HEAD_TIMEOUT_MS = 60_000;
const REQUEST_LINE = /^([A-Z]{1,20}) (\/proxy\/[\x21-\x7e]*) HTTP\/1\.1$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export type TunnelDeps = {
  contextHeader: string;
  checkContext(header: string | undefined): ContextCheck;
  /** `/proxy/{port}/rest` -> port and path, as the full server parses it (the daemon's own port refused). */
  target(url: string): ProxyTarget | { error: DaemonError } | undefined;
  touch(): void;
  /** The full HTTP server's connection handler: everything the fast path does not take. */
  fallback(socket: Socket): void;
};

/** What a person previewing a port needs to read when nothing answers there. */
export function upstreamError(port: number, err: Error): string {
  return (err as NodeJS.ErrnoException).code === "ECONNREFUSED"
    ? `nothing is listening on port ${port} in the sandbox`
    : `port ${port} in the sandbox is unreachable: ${err.message}`;
}

type FastRequest = { port: number; head: string; bodyLength: number };

/**
 * A plain request the tunnel may forward as bytes: an HTTP/1.1 `/proxy/{port}/` request with a valid user
 * context, no body or a Content-Length body, nothing ambiguous. Anything else (upgrades, chunked bodies, bad
 * or missing contexts, the daemon's own port, odd framing) returns undefined and is left to the full server,
 * which answers it exactly as it always has. Being strict here is what keeps the two parsers from ever
 * disagreeing about where a request ends.
 */
function fastRequest(head: string, remote: string, deps: TunnelDeps): FastRequest | undefined {
  const lines = head.split("\r\n");
  const line = REQUEST_LINE.exec(lines[0]!);
  if (!line) return undefined;
  const target = deps.target(line[2]!);
  if (!target || "error" in target) return undefined;
  let context: string | undefined;
  let bodyLength = 0;
  let sawLength = false;
  const kept: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const header = lines[i]!;
    const colon = header.indexOf(":");
    if (colon <= 0 || header.includes("\n") || header.includes("\r")) return undefined;
    const name = header.slice(0, colon);
    if (!TOKEN.test(name)) return undefined;
    const lower = name.toLowerCase();
    const value = header.slice(colon + 1).trim();
    if (lower === "transfer-encoding" || lower === "upgrade") return undefined;
    if (lower === "connection" && /upgrade/i.test(value)) return undefined;
    if (lower === "content-length") {
      if (sawLength || !/^\d{1,15}$/.test(value)) return undefined;
      sawLength = true;
      bodyLength = Number(value);
      kept.push(header);
    } else if (lower === deps.contextHeader) {
      if (context !== undefined) return undefined;
      context = value;
    } else if (lower !== "host" && lower !== "x-forwarded-for") kept.push(header);
  }
  if (!deps.checkContext(context).ok) return undefined;
  kept.push(`host: 127.0.0.1:${target.port}`, `x-forwarded-for: ${remote}`);
  return {
    port: target.port,
    head: `${line[1]} ${target.path} HTTP/1.1\r\n${kept.join("\r\n")}\r\n\r\n`,
    bodyLength,
  };
}

/**
 * The proxy's fast path. A connection whose requests are plain `/proxy/{port}/` requests becomes a tunnel to
 * that port: each request head is checked (user context on every request) and rewritten, bodies and every
 * response byte are copied as they come, and nothing is parsed on the way back, since HTTP/1.1 answers in
 * order on the one upstream connection. This costs a fraction of parsing and re-serializing each response,
 * which is what keeps a dev server behind the proxy near its direct throughput.
 *
 * When a request cannot take the fast path, or wants another port, the upstream connection is half-closed
 * and drained first, so every earlier response reaches the client before anything else is written; then the
 * connection continues on a new tunnel or on the full HTTP server (`fallback`) from that request on.
 */
export function handleConnection(socket: Socket, deps: TunnelDeps): void {
  const remote = socket.remoteAddress ?? "";
  let pending: Buffer = Buffer.alloc(0);
  let bodyLeft = 0;
  let upstream: Socket | undefined;
  let upstreamPort = 0;
  let upstreamAnswered = false;
  let switching = false;
  let clientEnded = false;

  const firstHeadTimer = setTimeout(() => socket.destroy(), FIRST_HEAD_TIMEOUT_MS);
  firstHeadTimer.unref();

  function openUpstream(port: number): Socket {
    const up = connect({ port, host: "127.0.0.1", noDelay: true });
    upstreamPort = port;
    upstreamAnswered = false;
    up.on("data", (chunk: Buffer) => {
      upstreamAnswered = true;
      if (!socket.write(chunk)) up.pause();
    });
    up.on("drain", () => {
      if (!switching) socket.resume();
    });
    up.on("error", (err) => {
      if (up !== upstream) return;
      if (!upstreamAnswered && !socket.destroyed)
        socket.end(rawErrorResponse(daemonError("UPSTREAM_UNAVAILABLE", upstreamError(port, err))));
      else socket.destroy();
      upstream = undefined;
    });
    up.on("end", () => {
      if (up !== upstream) return;
      upstream = undefined;
      if (switching) {
        switching = false;
        socket.resume();
        pump();
      } else socket.end();
    });
    return up;
  }

  function handOff(): void {
    clearTimeout(firstHeadTimer);
    socket.off("data", onData);
    socket.off("end", onEnd);
    socket.off("drain", onDrain);
    socket.off("close", onClose);
    socket.off("error", onError);
    socket.pause();
    if (pending.length) socket.unshift(pending);
    deps.fallback(socket);
    socket.resume();
  }

  /** Stop reading, let the current upstream finish every answer it owes, then carry on with `pump`. */
  function drainUpstream(): void {
    switching = true;
    socket.pause();
    upstream!.end();
  }

  /** Out of buffered bytes: wait for more, or, once the client has finished sending, finish in turn. */
  function awaitMore(): void {
    if (!clientEnded) return;
    if (upstream) upstream.end();
    else socket.end();
  }

  /** The request at the front of `pending` cannot use the current tunnel. */
  function leaveTunnel(): void {
    if (upstream) drainUpstream();
    else handOff();
  }

  function pump(): void {
    while (!switching) {
      if (bodyLeft > 0) {
        if (!pending.length) {
          awaitMore();
          return;
        }
        const part = pending.subarray(0, Math.min(bodyLeft, pending.length));
        pending = pending.subarray(part.length);
        bodyLeft -= part.length;
        if (!upstream!.write(part)) socket.pause();
        continue;
      }
      const end = pending.indexOf(HEAD_END);
      if (end < 0) {
        if (pending.length > MAX_HEAD) leaveTunnel();
        else awaitMore();
        return;
      }
      const request = fastRequest(pending.toString("latin1", 0, end), remote, deps);
      if (!request || (upstream && request.port !== upstreamPort)) {
        leaveTunnel();
        return;
      }
      clearTimeout(firstHeadTimer);
      deps.touch();
      if (!upstream) upstream = openUpstream(request.port);
      pending = pending.subarray(end + HEAD_END.length);
      bodyLeft = request.bodyLength;
      if (!upstream.write(request.head, "latin1")) socket.pause();
    }
  }

  function onData(chunk: Buffer): void {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    pump();
  }
  function onEnd(): void {
    clientEnded = true;
    pump();
  }
  function onDrain(): void {
    upstream?.resume();
  }
  function onClose(): void {
    clearTimeout(firstHeadTimer);
    upstream?.destroy();
  }
  function onError(): void {
    socket.destroy();
  }

  socket.setNoDelay(true);
  socket.on("data", onData);
  socket.on("end", onEnd);
  socket.on("drain", onDrain);
  socket.on("close", onClose);
  socket.on("error", onError);
}
