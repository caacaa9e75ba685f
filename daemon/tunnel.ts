import type { Socket } from "node:net";
import { FIRST_HEAD_TIMEOUT_MS, HEAD_END, MAX_HEAD, parseHead, type TunnelHead } from "../protocol/http-head.ts";

/**
 * A request the tunnel forwards: the upstream it goes to (one name per destination), its rewritten head, and the
 * raw response its client gets when that upstream cannot be reached before it answered anything.
 */
export type Admitted = { upstream: string; connect(): Socket; head: string; unreachable(err: Error): string };

export type TunnelDeps = {
  /** The rewritten request, or undefined to leave it (and the connection from then on) to the full server. */
  admit(head: TunnelHead, socket: Socket): Admitted | undefined;
  /** The full HTTP server's connection handler: everything the fast path does not take. */
  fallback(socket: Socket): void;
};

/**
 * The daemon's proxy fast path. A connection whose requests are all admitted becomes a tunnel to their upstream:
 * each request head is checked and rewritten by `admit`, bodies and every response byte are copied as they come,
 * and nothing is parsed on the way back, since HTTP/1.1 answers in order on the one upstream connection. This
 * costs a fraction of parsing and re-serializing each response.
 *
 * When a request is not admitted, or wants another upstream, the upstream connection is half-closed and drained
 * first, so every earlier response reaches the client before anything else is written; then the connection
 * continues on a new tunnel or on the full HTTP server (`fallback`) from that request on.
 */
export function tunnelConnection(socket: Socket, deps: TunnelDeps): void {
  let pending: Buffer = Buffer.alloc(0);
  let bodyLeft = 0;
  let upstream: Socket | undefined;
  let upstreamKey = "";
  let upstreamAnswered = false;
  let switching = false;
  let clientEnded = false;

  const firstHeadTimer = setTimeout(() => socket.destroy(), FIRST_HEAD_TIMEOUT_MS);
  firstHeadTimer.unref();

  function openUpstream(admitted: Admitted): Socket {
    const up = admitted.connect();
    up.setNoDelay(true);
    upstreamKey = admitted.upstream;
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
      if (!upstreamAnswered && !socket.destroyed) socket.end(admitted.unreachable(err));
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

  /** A throwing `admit` must not take the process down from a socket's event: it refuses, like any other no. */
  function admitSafely(head: TunnelHead): Admitted | undefined {
    try {
      return deps.admit(head, socket);
    } catch {
      return undefined;
    }
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
      const head = parseHead(pending.toString("latin1", 0, end));
      const admitted = head && admitSafely(head);
      if (!head || !admitted || (upstream && admitted.upstream !== upstreamKey)) {
        leaveTunnel();
        return;
      }
      clearTimeout(firstHeadTimer);
      if (!upstream) upstream = openUpstream(admitted);
      pending = pending.subarray(end + HEAD_END.length);
      bodyLeft = head.bodyLength;
      if (!upstream.write(admitted.head, "latin1")) socket.pause();
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
