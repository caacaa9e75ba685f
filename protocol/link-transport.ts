import { constants, type Http2Stream } from "node:http2";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { createWebSocketStream, type WebSocket } from "ws";

// How a sandbox link carries bytes, shared by its two ends (daemon/link.ts, api/sandbox-links/). Kept apart from
// sandbox-link.ts, which the CLI loads through the stack settings and which must not pull these in.

/**
 * The link's HTTP/2 settings, both ends. Windows far above the 64 KiB default: each stream is a TCP connection a
 * preview or an SSE stream runs over, and a small window would cap it at one window per round trip. A session may
 * hold that much per stream in flight, so its memory bound (MB) is raised with it.
 */
export const LINK_H2 = {
  settings: { initialWindowSize: 4 << 20, maxConcurrentStreams: 10_000 },
  sessionWindow: 32 << 20,
  maxSessionMemory: 128,
} as const;

/** The largest WebSocket message either end accepts: HTTP/2 writes frames of 16 KiB; this is ample headroom. */
export const LINK_MAX_MESSAGE = 8 << 20;

/**
 * Joins a CONNECT stream and a TCP connection both ways, an end passed on as an end (a half-close survives). When
 * one side closes, the other follows: cleanly after what it holds is written, or at once (a reset) when the first
 * one failed, so a tunnel never lingers with one side gone and a caller never waits on a dead one. `lost` says
 * whether the stream's link went away: HTTP/2 ends every stream of a session whose transport ended as if each had
 * finished, so only the link's owner knows they were cut off.
 */
export function spliceStreams(stream: Http2Stream, socket: Socket, lost: () => boolean): void {
  // The stream's end is passed on by hand: one that comes with the link's loss is a cut, never a FIN.
  stream.pipe(socket, { end: false });
  stream.on("end", () => (lost() ? socket.resetAndDestroy() : socket.end()));
  socket.pipe(stream);
  // Each failure is followed by its 'close', which is where the other side is ended.
  stream.on("error", () => {});
  socket.on("error", () => {});
  stream.on("close", () => {
    if (socket.destroyed) return;
    // A FIN after a cut would pass a truncated answer off as whole where its length is "until the connection closes".
    if (!lost() && stream.rstCode === constants.NGHTTP2_NO_ERROR && stream.readableEnded)
      socket.end(() => socket.destroy());
    else socket.resetAndDestroy();
  });
  socket.on("close", (hadError) => {
    if (!stream.closed) stream.close(hadError ? constants.NGHTTP2_CONNECT_ERROR : constants.NGHTTP2_NO_ERROR);
  });
}

/**
 * The link's WebSocket as a byte stream (ws's createWebSocketStream), each batch of writes sent as one message:
 * HTTP/2 writes a frame's header and its payload apart, and a message each would double the frames, syscalls and
 * events per request at both ends.
 */
export function linkStream(ws: WebSocket): Duplex {
  const duplex = createWebSocketStream(ws);
  duplex.on("error", () => {});
  // ws's own stream assigns _write the same way; a Buffer's encoding argument is ignored.
  duplex._writev = (chunks, done) => duplex._write(Buffer.concat(chunks.map((c) => c.chunk as Buffer)), "binary", done);
  return duplex;
}
