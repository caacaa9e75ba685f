import type { FastifyBaseLogger, FastifyRequest } from "fastify";
import { pino } from "pino";
import { INVITE_PATH_TOKEN } from "../people/invites.ts";
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
        url: req.url
          // A preview link's grant, a sign-in link's code and the OpenID provider's code ride in the query.
          .replace(new RegExp(`([?&](?:${PREVIEW_PARAM}|code)=)[^&]*`, "g"), "$1[redacted]")
          .replace(INVITE_PATH_TOKEN, "$1[redacted]"),
        host: req.host,
        remoteAddress: req.ip,
      }),
    },
  });
}
