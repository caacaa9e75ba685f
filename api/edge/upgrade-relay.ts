import { type IncomingHttpHeaders, type IncomingMessage, request } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";

/** A response head as it goes on the wire: the status line, then each header (each value of a repeated one). */
function head(line: string, rawHeaders: string[]): string {
  const lines = [line];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) lines.push(`${rawHeaders[i]}: ${rawHeaders[i + 1]}`);
  return `${lines.join("\r\n")}\r\n\r\n`;
}

/** The request's headers with this hop appended to X-Forwarded-*, as the edge adds them to every request. */
function forwarded(req: IncomingMessage): IncomingHttpHeaders {
  const add = (name: string, value: string | undefined) => {
    const before = req.headers[name];
    return before ? `${before},${value ?? ""}` : (value ?? "");
  };
  return {
    ...req.headers,
    "x-forwarded-for": add("x-forwarded-for", req.socket.remoteAddress),
    "x-forwarded-port": add("x-forwarded-port", String(req.socket.localPort ?? "")),
    "x-forwarded-proto": add("x-forwarded-proto", "http"),
  };
}

const steady = (socket: Socket | Duplex) => {
  if ("setNoDelay" in socket) {
    socket.setTimeout(0);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 0);
  }
};

/**
 * Relays one HTTP/1.1 upgrade to the replica at `target`: the request as it came (this hop added to X-Forwarded-*),
 * then the replica's answer, and once it switched protocols, bytes both ways until either side ends. Any protocol:
 * WebSockets (previews, links) and exec's own `svc-exec`, which http-proxy would refuse (it passes only WebSockets).
 * A refusal (401, 404...) goes back as the replica wrote it. `unreachable` hears a replica that could not be
 * connected to; the client's connection is then closed.
 */
export function relayUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  early: Buffer,
  target: string,
  unreachable: (err: NodeJS.ErrnoException) => void,
): void {
  const url = new URL(target);
  steady(socket);
  socket.on("error", () => socket.destroy());
  const upstream = request({
    host: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port,
    method: req.method,
    path: req.url,
    headers: forwarded(req),
    agent: false,
  });
  upstream.on("error", (err) => {
    unreachable(err);
    socket.destroy();
  });
  upstream.on("response", (res) => {
    socket.write(head(`HTTP/${res.httpVersion} ${res.statusCode} ${res.statusMessage}`, res.rawHeaders));
    res.pipe(socket);
  });
  upstream.on("upgrade", (res, replica, replicaEarly) => {
    steady(replica);
    // Ends travel through the pipes; a side that fails takes the other down with it.
    replica.on("error", () => socket.destroy());
    socket.on("error", () => replica.destroy());
    socket.write(head(`HTTP/1.1 101 ${res.statusMessage || "Switching Protocols"}`, res.rawHeaders));
    if (replicaEarly.length) socket.write(replicaEarly);
    if (early.length) replica.write(early);
    replica.pipe(socket).pipe(replica);
  });
  upstream.end();
}
