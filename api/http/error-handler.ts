import { type ServerResponse, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { OrchestratorError } from "../../orchestrator/errors.ts";
import type { ErrorBody } from "../../protocol/errors.ts";
import { ApiError, fromOrchestrator } from "../errors.ts";

/** Fastify's own failures (body parsing, limits, routing) mapped onto the catalogue's codes. */
const FASTIFY_CODES: Record<string, [number, ErrorBody["code"], string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, "PAYLOAD_TOO_LARGE", "request body is too large"],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, "UNSUPPORTED_MEDIA_TYPE", "send JSON with content-type: application/json"],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, "BAD_REQUEST", "request body is not valid JSON"],
  FST_ERR_BAD_URL: [400, "BAD_REQUEST", "the path is not a valid URL"],
  FST_ERR_MAX_PARAM_LENGTH: [400, "VALIDATION_FAILED", "a path parameter is longer than 100 characters"],
};

/** Any other 4xx of the framework (an `FST_` code) keeps its class of answer, never a 500. */
const FALLBACK_4XX: Record<number, [number, ErrorBody["code"], string]> = {
  404: [404, "NOT_FOUND", "not found"],
  413: FASTIFY_CODES.FST_ERR_CTP_BODY_TOO_LARGE!,
  415: FASTIFY_CODES.FST_ERR_CTP_INVALID_MEDIA_TYPE!,
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

function known(err: FastifyError): [number, ErrorBody["code"], string] | undefined {
  const byCode = err.code ? FASTIFY_CODES[err.code] : undefined;
  if (byCode) return byCode;
  const status = err.statusCode ?? 0;
  const framework4xx = typeof err.code === "string" && err.code.startsWith("FST_") && status >= 400 && status < 500;
  if (err instanceof SyntaxError || status === 400 || framework4xx) {
    return FALLBACK_4XX[status] ?? [400, "BAD_REQUEST", "malformed request"];
  }
  return undefined;
}

/**
 * Fastify's `frameworkErrors`: failures the router meets before any route (an over-long or undecodable path
 * parameter) answer in the catalogue's shape too.
 */
export function frameworkErrors(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  const [status, code, error] = known(err) ?? [400, "BAD_REQUEST", "malformed request"];
  reply.code(status).send({ error, code } satisfies ErrorBody);
}

/**
 * Node's `clientError`: a request the HTTP parser refused (a request line or headers over the size limit, a
 * malformed request, a timeout) gets the catalogue's shape before the connection closes.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, code, error]: [number, ErrorBody["code"], string] =
    err.code === "HPE_HEADER_OVERFLOW"
      ? [431, "HEADERS_TOO_LARGE", "the request line or headers are too large"]
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "REQUEST_TIMEOUT", "the request took too long to arrive"]
        : [400, "BAD_REQUEST", "malformed HTTP request"];
  const body = JSON.stringify({ error, code } satisfies ErrorBody);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** The catalogue's answer as raw bytes, for a socket no HTTP response object owns; the connection then closes. */
export function rawErrorResponse(err: unknown): string {
  const { status, body } = errorResponse(err);
  const text = JSON.stringify(body);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`;
}

/** A refused WebSocket (or other) upgrade: the catalogue's answer written on the raw socket, which then closes. */
export function refuseUpgrade(socket: Duplex, err: unknown, logError: (err: unknown) => void): void {
  if (errorResponse(err).status === 500) logError(err);
  socket.end(rawErrorResponse(err));
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | ApiError | OrchestratorError, req, reply) => {
    if (err instanceof ApiError || err instanceof OrchestratorError) {
      const { status, body } = errorResponse(err);
      return reply.code(status).send(body);
    }
    const mapped = known(err);
    if (mapped) return reply.code(mapped[0]).send({ error: mapped[2], code: mapped[1] } satisfies ErrorBody);
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
