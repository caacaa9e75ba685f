import type { FastifyBaseLogger, FastifyRequest } from "fastify";
import { pino } from "pino";
import { PREVIEW_PARAM } from "../previews/grant.ts";

/**
 * The API's log (pino, as Fastify's own would be), made before the server: the services, and the request handler
 * that routes preview and app hosts to them, exist before Fastify does.
 */
export function createLogger(level = "info"): FastifyBaseLogger {
  return pino({
    level,
    // Tokens travel in these headers; they must never reach a log line.
    redact: ["req.headers.authorization", 'req.headers["x-svc-user-context"]'],
    serializers: {
      req: (req: FastifyRequest) => ({
        method: req.method,
        url: req.url.replace(new RegExp(`([?&]${PREVIEW_PARAM}=)[^&]*`, "g"), "$1[redacted]"),
        host: req.host,
        remoteAddress: req.ip,
      }),
    },
  });
}
