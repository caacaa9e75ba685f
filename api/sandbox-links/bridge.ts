import type { ClientHttp2Session } from "node:http2";
import { createServer, isIPv6, type Socket } from "node:net";
import { SANDBOX_SERVICE_PORT } from "../../protocol/env.ts";
import { spliceStreams } from "../../protocol/link-transport.ts";

/** What a CONNECT names; the daemon ignores it and always dials its own port. */
const AUTHORITY = `127.0.0.1:${SANDBOX_SERVICE_PORT}`;

export type Bridge = {
  /** `http://<host>:<port>`: the sandbox's endpoint for as long as this process lives. */
  url: string;
  /** The link's session connections go over from now on; undefined: the link is down. */
  use(session: ClientHttp2Session | undefined): void;
  close(): void;
};

/**
 * A loopback listener standing in for one sandbox's daemon: each TCP connection accepted is joined to a spare
 * connection the daemon dialed (`spare`, spares.ts) or, when none is idle, becomes a CONNECT stream over the
 * sandbox's link, spliced byte for byte, so fetch, undici's pools, http-proxy and the preview tunnel use
 * the bridge's URL as they would the daemon's address. While the link is down a connection is reset at once, and
 * those it carried are reset as it drops (their streams die with its session): a caller learns that the sandbox
 * stopped answering, never waits on it. The port outlives the link's reconnects: a URL stored for it stays good.
 *
 * `host` is loopback for an API alone. In a stack of several API replicas (SVC_LINK_BRIDGE_HOST) it is this
 * replica's address on the stack's network, so the others reach the sandbox through the URL its row holds. That
 * keeps the trust model: the stack's network holds only the stack's own services (PostgreSQL, the API replicas,
 * the edge), never a sandbox (each has a network of its own), and a connection to the port gets no more than a
 * connection to the daemon's own port would: the daemon still checks its service key on /svc/ calls and the signed
 * user context on every other request.
 */
export async function openBridge(
  host = "127.0.0.1",
  spare: () => Socket | undefined = () => undefined,
): Promise<Bridge> {
  let session: ClientHttp2Session | undefined;
  const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    socket.on("error", () => {});
    const live = session;
    if (!live || live.closed || live.destroyed) return void socket.resetAndDestroy();
    const taken = spare();
    if (taken) return joinSockets(socket, taken);
    let stream: ReturnType<ClientHttp2Session["request"]>;
    try {
      stream = live.request({ ":method": "CONNECT", ":authority": AUTHORITY });
    } catch {
      // The session is going away (GOAWAY sent or received) between the check above and the request.
      return void socket.resetAndDestroy();
    }
    stream.once("response", (headers) => {
      if (headers[":status"] !== 200) socket.resetAndDestroy();
    });
    // Cut off, not ended, once the link that carried it is no longer the bridge's (dropped or replaced), or is going:
    // a stream its session's end ended can come before the registry hears of that end.
    spliceStreams(stream, socket, () => session !== live || linkGoing(live));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  server.on("error", () => {});
  const { port } = server.address() as { port: number };

  return {
    url: `http://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    use(next) {
      session = next;
    },
    close() {
      session = undefined;
      server.close();
    },
  };
}

/** Whether a link's session is closing or its transport (the daemon's connection) has ended. */
function linkGoing(live: ClientHttp2Session): boolean {
  const transport = live.socket as { destroyed?: boolean; readableEnded?: boolean } | undefined;
  return (
    live.closed || live.destroyed || !transport || transport.destroyed === true || transport.readableEnded === true
  );
}

/** Joins two TCP connections both ways, a half-close passed on as one; one that fails resets the other. */
function joinSockets(a: Socket, b: Socket): void {
  for (const [from, to] of [
    [a, b],
    [b, a],
  ] as const) {
    from.pipe(to);
    from.on("error", () => {});
    from.on("close", (hadError) => {
      if (to.destroyed) return;
      if (hadError) to.resetAndDestroy();
      else to.end(() => to.destroy());
    });
  }
  b.resume();
}
