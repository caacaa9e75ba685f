import { describe, expect, it } from "vitest";
import { ErrorCode } from "../protocol/errors.ts";
import { ApiError, apiError } from "./errors.ts";

const HTTP_ERROR_STATUSES = new Set([400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 431, 500, 502, 503]);

describe("the API's error catalogue", () => {
  it("gives every shared error code an HTTP error status", () => {
    for (const code of ErrorCode.options) {
      const status = new ApiError(code, "x").status;
      expect(HTTP_ERROR_STATUSES.has(status), `${code} -> ${status}`).toBe(true);
    }
  });

  it("maps the codes clients branch on to their documented statuses", () => {
    const statuses = Object.fromEntries(ErrorCode.options.map((code) => [code, apiError(code, "x").status]));
    expect(statuses).toMatchObject({
      VALIDATION_FAILED: 400,
      UNAUTHENTICATED: 401,
      TOKEN_EXPIRED: 401,
      FORBIDDEN: 403,
      NOT_FOUND: 404,
      PROJECT_NOT_FOUND: 404,
      CR_NOT_FOUND: 404,
      SESSION_NOT_FOUND: 404,
      CR_NOT_OPEN: 409,
      MERGE_CONFLICT: 409,
      SESSION_CAP_REACHED: 429,
      PAYLOAD_TOO_LARGE: 413,
      UNSUPPORTED_MEDIA_TYPE: 415,
      SANDBOX_UNREACHABLE: 502,
      INTERNAL: 500,
    });
  });

  it("carries its code, message and details", () => {
    const err = apiError("SLUG_TAKEN", "slug 'web' is taken", { field: "slug" });
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ code: "SLUG_TAKEN", status: 409, message: "slug 'web' is taken" });
    expect(err.details).toEqual({ field: "slug" });
  });
});
