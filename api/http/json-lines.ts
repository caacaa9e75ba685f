import { once } from "node:events";
import type { FastifyReply } from "fastify";

/**
 * Streams `lines` as JSON lines (application/x-ndjson) on a hijacked reply, honouring backpressure; `abort` fires
 * when the client leaves, so a followed source stops.
 */
export async function sendJsonLines(
  reply: FastifyReply,
  lines: AsyncIterable<unknown>,
  abort: AbortController,
): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.on("close", () => abort.abort());
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  try {
    for await (const line of lines) {
      if (!res.write(`${JSON.stringify(line)}\n`)) await once(res, "drain", { signal: abort.signal });
    }
  } catch {
    // The client left, or the engine cut the stream as the container went away: either way the log ends here.
  }
  res.end();
}
