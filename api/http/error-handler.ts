import type { ServerResponse } from "node:http";
import type { FastifyError, FastifyInstance } from "fastify";
import { OrchestratorError } from "../../orchestrator/errors.ts";
import type { ErrorBody } from "../../protocol/errors.ts";
import { ApiError, fromOrchestrator } from "../errors.ts";

/** Fastify's own failures (body parsing, limits) mapped onto the catalogue's codes. */
const FASTIFY_CODES: Record<string, [number, ErrorBody["code"], string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, "PAYLOAD_TOO_LARGE", "request body is too large"],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, "UNSUPPORTED_MEDIA_TYPE", "send JSON with content-type: application/json"],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, "BAD_REQUEST", "request body is empty but content-type is JSON"],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, "BAD_REQUEST", "request body is not valid JSON"],
};

/** An error as the client sees it: the catalogue's status and body; anything unknown is a bare 500. */
export function errorResponse(err: unknown): { status: number; body: ErrorBody } {
  const known = err instanceof OrchestratorError ? fromOrchestrator(err) : err;
  if (known instanceof ApiError)
    return { status: known.status, body: { ...known.details, error: known.message, code: known.code } };
  return { status: 500, body: { error: "internal error", code: "INTERNAL" } };
}

/**
 * The one writer for answers outside Fastify's reply (raw proxying). A response already under way cannot
 * change its status: it is cut short instead. Returns the status for callers that log 500s.
 */
export function writeError(res: ServerResponse, err: unknown): number {
  const { status, body } = errorResponse(err);
  if (res.headersSent) {
    res.destroy();
    return status;
  }
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
  return status;
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | ApiError | OrchestratorError, req, reply) => {
    if (err instanceof ApiError || err instanceof OrchestratorError) {
      const { status, body } = errorResponse(err);
      return reply.code(status).send(body);
    }
    const known = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (known) return reply.code(known[0]).send({ error: known[2], code: known[1] } satisfies ErrorBody);
    if (err instanceof SyntaxError || err.statusCode === 400) {
      return reply.code(400).send({ error: "malformed request", code: "BAD_REQUEST" } satisfies ErrorBody);
    }
    // Internals stay in the log; the client gets a stable, secret-free message.
    req.log.error({ err }, "unhandled error");
    return reply.code(500).send({ error: "internal error", code: "INTERNAL" } satisfies ErrorBody);
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .code(404)
      .send({ error: `no route ${req.method} ${req.url.split("?")[0]}`, code: "NOT_FOUND" } satisfies ErrorBody),
  );
}
