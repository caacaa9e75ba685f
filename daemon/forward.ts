import type { IncomingMessage, ServerResponse } from "node:http";
import type { Pool } from "undici";
import { upstreamError } from "./proxy-tunnel.ts";

/** Connection-scoped headers never cross a proxy (RFC 9110 §7.6.1); the host is the upstream's own. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
]);

function endToEnd(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

/**
 * Plain HTTP to a port inside the sandbox through a keep-alive undici pool per port: about 2.4x the throughput of
 * http-proxy on these machines. Bodies stream both ways, so server-sent events arrive as they are written.
 * undici loads on the first proxied request, so an idle daemon does not pay its memory.
 */
export function createForwarder() {
  const pools = new Map<number, Promise<Pool>>();
  const poolFor = (port: number) => {
    let pool = pools.get(port);
    if (!pool) {
      pool = import("undici").then(({ Pool }) => new Pool(`http://127.0.0.1:${port}`, { connections: 128 }));
      pools.set(port, pool);
    }
    return pool;
  };

  return async function forward(req: IncomingMessage, res: ServerResponse, port: number, path: string): Promise<void> {
    const pool = await poolFor(port);
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    try {
      await pool.stream(
        {
          path,
          method: req.method as "GET",
          headers: { ...endToEnd(req.headers), "x-forwarded-for": req.socket.remoteAddress ?? "" },
          body: hasBody ? req : null,
        },
        ({ statusCode, headers }) => {
          res.writeHead(statusCode, endToEnd(headers));
          res.flushHeaders();
          return res;
        },
      );
    } catch (err) {
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: upstreamError(port, err as Error) }));
      } else res.destroy();
    }
  };
}
