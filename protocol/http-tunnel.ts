import { connect, type Socket } from "node:net";
import { FIRST_HEAD_TIMEOUT_MS, HEAD_END, MAX_HEAD, parseHead, type TunnelHead } from "./http-head.ts";

/** A request the tunnel forwards: its upstream (one name per destination), that upstream's address, its new head. */
export type Admitted = { upstream: string; address: UpstreamAddress; head: string };
export type UpstreamAddress = { host: string; port: number };

/** What one read from an upstream takes at most: its answers are copied on from this buffer as they come. */
const UPSTREAM_READ = 64 * 1024;

export type TunnelDeps<A extends Admitted = Admitted> = {
  /** The rewritten request, or undefined to leave it (and the connection from then on) to the full server. */
  admit(head: TunnelHead, socket: Socket): A | undefined | Promise<A | undefined>;
  /** The raw response for a client whose upstream could not be reached before it answered anything: `admitted`,
   * the request that opened that upstream connection. */
  unreachable(err: Error, admitted: A): string;
  /** The full HTTP server's connection handler: everything the fast path does not take. */
  fallback(socket: Socket): void;
  /**
   * A connection to the upstream already open (a sandbox's spare), taken in place of dialing its address; a promise
   * holds the client's reading until it settles (one is on its way).
   */
  opened?(admitted: A): Socket | undefined | Promise<Socket | undefined>;
};

/**
 * The fast path of the API's previews (api/previews/tunnel.ts) and of the daemon's proxy (daemon/proxy-tunnel.ts):
 * one mechanism for both ends of a preview. A connection whose requests are all admitted becomes a tunnel
 * to their upstream: each request head is checked and rewritten by `admit`, bodies and every response byte are
 * copied as they come, and nothing is parsed on the way back, since HTTP/1.1 answers in order on the one upstream
 * connection. This costs a fraction of parsing and re-serializing each response.
 *
 * When a request is not admitted, or wants another upstream, the upstream connection is half-closed and drained
 * first, so every earlier response reaches the client before anything else is written; then the connection
 * continues on a new tunnel or on the full HTTP server (`fallback`) from that request on. An `admit` that has to
 * wait (a lookup) holds the connection's reading until it answers; a failed one counts as not admitted.
 */
export function tunnelConnection<A extends Admitted>(socket: Socket, deps: TunnelDeps<A>): void {
  let pending: Buffer = Buffer.alloc(0);
  let bodyLeft = 0;
  let upstream: Socket | undefined;
  let upstreamKey = "";
  let upstreamAnswered = false;
  let switching = false;
  let admitting = false;
  let clientEnded = false;

  const firstHeadTimer = setTimeout(() => socket.destroy(), FIRST_HEAD_TIMEOUT_MS);
  firstHeadTimer.unref();

  /**
   * The upstream's answers are read into one buffer and written on from it, without a stream's per-chunk work; a
   * write the client does not take at once keeps that buffer, so the next read goes into a fresh one. Returning
   * false stops reading until the client drains.
   */
  let readBuffer: Buffer | undefined;
  function relay(nread: number, buffer: Buffer): boolean {
    upstreamAnswered = true;
    const taken = socket.write(buffer.subarray(0, nread));
    if (socket.writableLength > 0) readBuffer = undefined;
    return taken;
  }
  const nextReadBuffer = () => (readBuffer ??= Buffer.allocUnsafe(UPSTREAM_READ));

  function openUpstream(admitted: A, opened: Socket | undefined): Socket {
    const up = opened ?? connect({ ...admitted.address, onread: { buffer: nextReadBuffer, callback: relay } });
    if (opened) {
      opened.on("data", (chunk: Buffer) => {
        if (!relay(chunk.length, chunk)) opened.pause();
      });
      opened.resume();
    }
    up.setNoDelay(true);
    upstreamKey = admitted.upstream;
    upstreamAnswered = false;
    up.on("drain", () => {
      if (!switching && !admitting) socket.resume();
    });
    up.on("error", (err) => {
      if (up !== upstream) return;
      if (!upstreamAnswered && !socket.destroyed) socket.end(deps.unreachable(err, admitted));
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
      } else if (!admitting) socket.end();
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

  /**
   * Sends an admitted request's head on, over `opened` when given (null: none was to be had); false when it left the
   * tunnel instead, or waits for an upstream connection on its way and carries on from there.
   */
  function send(head: TunnelHead, admitted: A | undefined, headLength: number, opened?: Socket | null): boolean {
    if (!admitted || (upstream && admitted.upstream !== upstreamKey)) {
      leaveTunnel();
      return false;
    }
    clearTimeout(firstHeadTimer);
    if (!upstream) {
      const ready = opened === undefined ? deps.opened?.(admitted) : (opened ?? undefined);
      if (ready instanceof Promise) {
        hold(
          ready,
          (socket) => send(head, admitted, headLength, socket ?? null),
          (socket) => socket?.destroy(),
        );
        return false;
      }
      upstream = openUpstream(admitted, ready);
    }
    pending = pending.subarray(headLength);
    bodyLeft = head.bodyLength;
    if (!upstream.write(admitted.head, "latin1")) socket.pause();
    return true;
  }

  /** A throwing `admit` must not take the process down from a socket's event: it refuses, like any other no. */
  function admitSafely(head: TunnelHead): ReturnType<TunnelDeps<A>["admit"]> {
    try {
      return deps.admit(head, socket);
    } catch {
      return undefined;
    }
  }

  function pump(): void {
    while (!switching && !admitting) {
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
      if (!head) {
        leaveTunnel();
        return;
      }
      const headLength = end + HEAD_END.length;
      const admitted = admitSafely(head);
      if (!(admitted instanceof Promise)) {
        if (!send(head, admitted, headLength)) return;
        continue;
      }
      hold(admitted, (result) => send(head, result, headLength));
      return;
    }
  }

  /**
   * Stops reading the client until `waited` settles (a failure counts as undefined), then goes on with `then`, and
   * pumps on if it sent; a client gone by then leaves the result to `unused`.
   */
  function hold<T>(
    waited: Promise<T | undefined>,
    then: (result: T | undefined) => boolean,
    unused?: (result: T | undefined) => void,
  ) {
    admitting = true;
    socket.pause();
    waited
      .catch(() => undefined)
      .then((result) => {
        admitting = false;
        if (socket.destroyed) return unused?.(result);
        socket.resume();
        if (then(result)) pump();
      });
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
