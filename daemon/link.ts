import { performServerHandshake, type ServerHttp2Stream } from "node:http2";
import { connect, type Socket } from "node:net";
import { WebSocket } from "ws";
import { LINK_H2, LINK_MAX_MESSAGE, linkStream, spliceStreams } from "../protocol/link-transport.ts";
import { keepSpares, linkSocket } from "./link-spares.ts";

export type LinkDeps = {
  /** The API's link endpoint (SVC_LINK_URL). */
  url: string;
  /** The API's socket to dial the URL through (SVC_LINK_SOCKET), while it is there; TCP otherwise. */
  socket?: string;
  /** The sandbox's service key: the bearer the API knows this sandbox by. */
  serviceKey: string;
  /** Where every CONNECT stream goes: the daemon's own server, on loopback. */
  target: { host: string; port: number };
  /** Takes a spare connection the API started using (link-spares.ts) as one of the daemon's own server. */
  accept: (socket: Socket) => void;
  log: (msg: string) => void;
  /** Redial delays: the first, doubling up to the last (jittered). */
  backoff?: { firstMs: number; maxMs: number };
  /** No ping from the API for this long: the link is dead even if TCP never said so. */
  silenceMs?: number;
};

const BACKOFF = { firstMs: 250, maxMs: 10_000 };
/** The API pings every 15 s (api/sandbox-links/registry.ts); three missed in a row end the link. */
const SILENCE_MS = 45_000;
const HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * Serves the API's HTTP/2 session over the link: each CONNECT stream becomes a fresh TCP connection to the
 * daemon's own port, so what the API sends (plain HTTP, SSE, WebSocket upgrades, the user-context checks) reaches
 * the existing server byte for byte. Anything but CONNECT is refused: the link is a pipe, not a second server.
 */
function serve(ws: WebSocket, target: LinkDeps["target"], onStream: () => void): void {
  const duplex = linkStream(ws);
  const session = performServerHandshake(duplex, {
    settings: LINK_H2.settings,
    maxSessionMemory: LINK_H2.maxSessionMemory,
  });
  session.on("error", () => {});
  session.once("remoteSettings", () => session.setLocalWindowSize(LINK_H2.sessionWindow));
  session.on("stream", (stream: ServerHttp2Stream, headers) => {
    if (headers[":method"] !== "CONNECT") {
      stream.respond({ ":status": 405 }, { endStream: true });
      return;
    }
    onStream();
    const socket = connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
    // Bytes the API sent ahead of the answer wait in the socket until it connects.
    socket.once("connect", () => {
      if (!stream.closed) stream.respond({ ":status": 200 });
    });
    // A stream that closes with the link was cut off, not finished: the daemon's server sees a reset.
    spliceStreams(stream, socket, () => ws.readyState !== WebSocket.OPEN);
  });
}

/**
 * Keeps one link to the API open while the daemon runs: dials, serves the API's HTTP/2 session over it, and when
 * it drops dials again after 0.25 s, doubling to 10 s (jittered, so sandboxes of a restarted API do not come back
 * in step), forever. One log line when the link comes up, one when it goes down (or when it first fails to come
 * up): a sandbox that cannot reach its API says so once, not every ten seconds.
 */
export function startLink(deps: LinkDeps): { stop(): void } {
  const backoff = deps.backoff ?? BACKOFF;
  const silenceMs = deps.silenceMs ?? SILENCE_MS;
  let delay = backoff.firstMs;
  let stopped = false;
  let failing = false;
  let current: WebSocket | undefined;
  let socketRefused = false;
  let timer: NodeJS.Timeout | undefined;

  function redial(): void {
    if (stopped) return;
    const wait = delay * (0.5 + Math.random() / 2);
    delay = Math.min(delay * 2, backoff.maxMs);
    timer = setTimeout(dial, wait);
  }

  function dial(): void {
    // The API's socket while it is there, unless it refused this daemon; TCP otherwise.
    const socket = socketRefused ? undefined : linkSocket(deps.socket);
    const ws = new WebSocket(deps.url, {
      headers: { authorization: `Bearer ${deps.serviceKey}` },
      ...(socket ? { createConnection: () => connect({ path: socket }) } : {}),
      perMessageDeflate: false,
      // Masking guards browsers' WebSockets against caches in between; a daemon is no browser, and a mask of zeros
      // spares XOR-ing every byte of the link.
      generateMask: (mask: Buffer) => void mask.fill(0),
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      maxPayload: LINK_MAX_MESSAGE,
    });
    current = ws;
    let up = false;
    let why = "";
    let silence: NodeJS.Timeout | undefined;
    let spares: { stop(): void } | undefined;
    const heard = () => {
      clearTimeout(silence);
      silence = setTimeout(() => ws.terminate(), silenceMs);
    };
    ws.on("open", () => {
      up = true;
      failing = false;
      delay = backoff.firstMs;
      deps.log(`link up: ${deps.url}`);
      heard();
      ws.on("ping", heard);
      const kept = keepSpares({ url: deps.url, socket, serviceKey: deps.serviceKey, accept: deps.accept });
      spares = kept;
      // A stream means the API found no spare idle: one more is kept from then on.
      serve(ws, deps.target, () => kept.more());
    });
    ws.on("error", (err) => {
      why = err.message;
      // A socket this daemon may not connect to (a user namespace maps its root to another user): TCP from now on.
      const code = (err as NodeJS.ErrnoException).code;
      if (socket && (code === "EACCES" || code === "EPERM")) socketRefused = true;
    });
    ws.on("close", (code) => {
      clearTimeout(silence);
      spares?.stop();
      if (up) deps.log(`link down: ${why || `closed (${code})`}; dialing again`);
      else if (!failing && !stopped) deps.log(`link to ${deps.url} not up: ${why || `closed (${code})`}; retrying`);
      failing = true;
      redial();
    });
  }

  dial();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      current?.terminate();
    },
  };
}
