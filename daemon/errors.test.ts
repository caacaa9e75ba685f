import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { ErrorBody } from "../protocol/errors.ts";
import { DaemonError, daemonError, errorBody, rawErrorResponse, sendError, toDaemonError } from "./errors.ts";

/** Just enough of a ServerResponse to see what sendError writes. */
function recorder() {
  const seen = { status: 0, headers: {} as Record<string, unknown>, body: "" };
  const res = {
    writeHead(status: number, headers: Record<string, unknown>) {
      seen.status = status;
      seen.headers = headers;
      return res;
    },
    end(body: string) {
      seen.body = body;
    },
  };
  return { res: res as unknown as ServerResponse, seen };
}

describe("the daemon's errors", () => {
  it("take their status from the catalogue", () => {
    const statuses = (
      [
        "BAD_REQUEST",
        "VALIDATION_FAILED",
        "UNAUTHENTICATED",
        "FORBIDDEN",
        "NOT_FOUND",
        "METHOD_NOT_ALLOWED",
        "CONFLICT",
        "PAYLOAD_TOO_LARGE",
        "INTERNAL",
        "UPSTREAM_UNAVAILABLE",
        "AGENT_RUNTIME_UNAVAILABLE",
      ] as const
    ).map((code) => [code, daemonError(code, "x").status]);
    expect(Object.fromEntries(statuses)).toEqual({
      BAD_REQUEST: 400,
      VALIDATION_FAILED: 400,
      UNAUTHENTICATED: 401,
      FORBIDDEN: 403,
      NOT_FOUND: 404,
      METHOD_NOT_ALLOWED: 405,
      CONFLICT: 409,
      PAYLOAD_TOO_LARGE: 413,
      INTERNAL: 500,
      UPSTREAM_UNAVAILABLE: 502,
      AGENT_RUNTIME_UNAVAILABLE: 503,
    });
  });

  it("become ErrorBody: message as `error`, the code, details beside them", () => {
    const body = errorBody(daemonError("VALIDATION_FAILED", "text: too short", { field: "text" }));
    expect(body).toEqual({ error: "text: too short", code: "VALIDATION_FAILED", field: "text" });
    expect(ErrorBody.parse(body)).toEqual(body);
    // Details never overwrite the message or the code.
    expect(errorBody(daemonError("NOT_FOUND", "gone", { error: "x", code: "y" }))).toEqual({
      error: "gone",
      code: "NOT_FOUND",
    });
  });

  it("keep their own kind and wrap anything else as INTERNAL with its message", () => {
    const own = daemonError("CONFLICT", "diverged");
    expect(toDaemonError(own)).toBe(own);
    const wrapped = toDaemonError(new Error("agent runtime answered 500 to POST /session"));
    expect(wrapped).toBeInstanceOf(DaemonError);
    expect(wrapped).toMatchObject({
      code: "INTERNAL",
      status: 500,
      message: "agent runtime answered 500 to POST /session",
    });
    expect(toDaemonError("plain string")).toMatchObject({ code: "INTERNAL", message: "plain string" });
  });

  it("are written as a JSON answer with its length", () => {
    const { res, seen } = recorder();
    sendError(res, daemonError("AGENT_RUNTIME_UNAVAILABLE", "the agent runtime is starting"));
    expect(seen.status).toBe(503);
    expect(seen.headers).toEqual({ "content-type": "application/json", "content-length": seen.body.length });
    expect(JSON.parse(seen.body)).toEqual({
      error: "the agent runtime is starting",
      code: "AGENT_RUNTIME_UNAVAILABLE",
    });
  });

  it("are written as a complete raw HTTP/1.1 answer that closes the connection", () => {
    const raw = rawErrorResponse(daemonError("UPSTREAM_UNAVAILABLE", "nothing is listening on port 3000 — yet"));
    const [head, body] = raw.split("\r\n\r\n") as [string, string];
    expect(head.split("\r\n")).toEqual([
      "HTTP/1.1 502 Bad Gateway",
      "content-type: application/json",
      `content-length: ${Buffer.byteLength(body)}`,
      "connection: close",
    ]);
    expect(Buffer.byteLength(body)).toBeGreaterThan(body.length);
    expect(JSON.parse(body)).toEqual({
      error: "nothing is listening on port 3000 — yet",
      code: "UPSTREAM_UNAVAILABLE",
    });
  });
});
