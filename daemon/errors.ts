import { type ServerResponse, STATUS_CODES } from "node:http";
import type { ErrorBody, ErrorCode, SandboxErrorCode } from "../protocol/errors.ts";

/** What the daemon answers with: a few of the shared codes, and the sandbox's own. */
export type DaemonErrorCode =
  | Extract<
      ErrorCode,
      | "BAD_REQUEST"
      | "VALIDATION_FAILED"
      | "UNAUTHENTICATED"
      | "FORBIDDEN"
      | "NOT_FOUND"
      | "CONFLICT"
      | "PAYLOAD_TOO_LARGE"
      | "INTERNAL"
      | "MODEL_NOT_CONFIGURED"
      | "AGENT_NOT_FOUND"
    >
  | SandboxErrorCode;

/** The daemon's error catalogue: each code maps to one HTTP status (a shared code to the API's), here only. */
const STATUS: Record<DaemonErrorCode, number> = {
  BAD_REQUEST: 400,
  VALIDATION_FAILED: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  INTERNAL: 500,
  MODEL_NOT_CONFIGURED: 503,
  AGENT_NOT_FOUND: 400,
  UPSTREAM_UNAVAILABLE: 502,
  AGENT_RUNTIME_UNAVAILABLE: 503,
};

export class DaemonError extends Error {
  readonly status: number;
  constructor(
    readonly code: DaemonErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.status = STATUS[code];
  }
}

export const daemonError = (code: DaemonErrorCode, message: string, details?: Record<string, unknown>) =>
  new DaemonError(code, message, details);

/** Anything thrown, as the daemon's error: its own as they are, anything else INTERNAL with its message. */
export function toDaemonError(err: unknown): DaemonError {
  if (err instanceof DaemonError) return err;
  return new DaemonError("INTERNAL", err instanceof Error ? err.message : String(err));
}

export function errorBody(err: DaemonError): ErrorBody {
  return { ...err.details, error: err.message, code: err.code };
}

/** Answers a request with the error: the one writer of error responses on the daemon's HTTP server. */
export function sendError(res: ServerResponse, err: DaemonError): void {
  const text = JSON.stringify(errorBody(err));
  res.writeHead(err.status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The same answer as raw HTTP/1.1, for a socket no ServerResponse owns (an upgrade request, the proxy's tunnel).
 * It closes the connection.
 */
export function rawErrorResponse(err: DaemonError): string {
  const text = JSON.stringify(errorBody(err));
  return `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? "Error"}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`;
}
