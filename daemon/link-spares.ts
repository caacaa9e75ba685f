import { existsSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import { SANDBOX_SPARE_UPGRADE } from "../protocol/sandbox-link.ts";

/** Spares kept dialed while the link is up at first: enough for a page's first few connections. */
export const SPARES = 4;
/** What `more` grows the spares to at most, below what the API holds (api/sandbox-links/spares.ts MAX_SPARES). */
export const MOST_SPARES = 24;
/** A spare the API closed unused (it restarted, say) is dialed again after this long, not in a tight loop. */
const REDIAL_MS = 1_000;
/**
 * Refusals in a row before the daemon stops dialing spares until its next link. A name several API replicas answer
 * to (compose mode's alias) sends each dial to any of them, and only the one holding the link takes spares.
 */
const MAX_REFUSALS = 12;
const REFUSED_DELAY_MS = 100;

/**
 * The socket to dial through, looked up at each dial: a sandbox outlives its API process, and the socket is there
 * only while one listens on it (or its file was left behind, which a refused dial retries like any other).
 */
export function linkSocket(path: string | undefined): string | undefined {
  return path && existsSync(path) ? path : undefined;
}

export type SparesDeps = {
  /** The link's URL (ws:// or wss://): spares go where the link went, so they reach the same API replica. */
  url: string;
  /** The API's socket the link was dialed through (linkSocket), when there is one. */
  socket?: string;
  serviceKey: string;
  /** Takes a spare the API started using as a connection of the daemon's own server. */
  accept: (socket: Socket) => void;
};

/**
 * Keeps SPARES spare connections dialed to the API while the link is up: plain TCP connections the API takes, one
 * per connection it would have opened to the daemon, so a preview's bytes go through no framing at either end (the
 * link's HTTP/2 streams cost a preview a third of its throughput). A spare is the daemon's server's from the API's
 * first byte on, and another is dialed in its place. Taking the last idle one keeps one more from then on; the API
 * waits a moment for the next rather than open a stream over the link (api/sandbox-links/registry.ts). The link
 * stays the way in for everything else: when no spare came in time, the API opens a stream over it instead, which
 * is also the daemon's sign (`more`) to keep one more spare from then on. A spare refused (it reached another
 * replica than the link's) is dialed again shortly, up to MAX_REFUSALS in a row, after which none are until the
 * next link.
 */
export function keepSpares(deps: SparesDeps): { more(): void; stop(): void } {
  let count = SPARES;
  const url = new URL(deps.url);
  url.protocol = url.protocol === "wss:" ? "https:" : "http:";
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  const idle = new Set<Socket>();
  let dialing = 0;
  let refusals = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  function fill(): void {
    while (!stopped && idle.size + dialing < count) dial();
  }

  /** One timer at a time brings the spares back up after a refusal, an error or a spare closed unused. */
  function refill(): void {
    timer = undefined;
    fill();
  }

  function dial(): void {
    dialing += 1;
    const socketPath = linkSocket(deps.socket);
    const req = request(url, {
      agent: false,
      ...(socketPath ? { socketPath } : {}),
      headers: { authorization: `Bearer ${deps.serviceKey}`, connection: "Upgrade", upgrade: SANDBOX_SPARE_UPGRADE },
    });
    let settled = false;
    const settle = () => {
      const first = !settled;
      settled = true;
      if (first) dialing -= 1;
      return first;
    };
    req.on("upgrade", (_res, socket: Socket, head: Buffer) => {
      settle();
      refusals = 0;
      if (stopped) return void socket.destroy();
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 30_000);
      // As the daemon's server's own connections are: the API's half-close (a tunnel draining before it hands the
      // connection to its full server) must leave the answers still owed to be written, not end them.
      socket.allowHalfOpen = true;
      idle.add(socket);
      // The API ending a spare it never used (its caller left first) ends it here too, and another is dialed.
      const ended = () => socket.destroy();
      const take = (first: Buffer) => {
        idle.delete(socket);
        socket.off("end", ended);
        // The last idle spare taken: demand reached the spares' number, so one more is kept from then on, ahead of
        // the next burst (a page's connections, a load test's) rather than after it.
        if (idle.size === 0) grow();
        socket.off("close", dropped);
        socket.pause();
        socket.unshift(first);
        deps.accept(socket);
        socket.resume();
        fill();
      };
      const dropped = () => {
        idle.delete(socket);
        if (!stopped && !timer) timer = setTimeout(refill, REDIAL_MS);
      };
      socket.on("error", () => socket.destroy());
      socket.once("close", dropped);
      socket.once("end", ended);
      if (head.length) take(head);
      else socket.once("data", take);
    });
    // An answer that is no upgrade is a refusal.
    req.on("response", (res) => {
      res.resume();
      if (!settle() || stopped) return;
      refusals += 1;
      if (refusals >= MAX_REFUSALS) stopped = true;
      else if (!timer) timer = setTimeout(refill, REFUSED_DELAY_MS);
    });
    req.on("error", () => {
      if (settle() && !stopped && !timer) timer = setTimeout(refill, REDIAL_MS);
    });
    req.end();
  }

  function grow(): void {
    count = Math.min(count + 1, MOST_SPARES);
  }

  fill();
  return {
    more() {
      grow();
      fill();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      for (const socket of idle) socket.destroy();
      idle.clear();
    },
  };
}
