import type { OrchestratorError, OrchestratorErrorCode } from "../orchestrator/errors.ts";
import type { ErrorCode } from "../protocol/errors.ts";

/** The API's error catalogue: each stable code maps to exactly one HTTP status, here and nowhere else. */
const STATUS: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  VALIDATION_FAILED: 400,
  UNAUTHENTICATED: 401,
  TOKEN_EXPIRED: 401,
  FORBIDDEN: 403,
  TOKEN_PROJECT_MISMATCH: 403,
  PROJECT_TOKEN_NOT_ALLOWED: 403,
  SERVICE_KEY_NOT_ALLOWED: 403,
  SESSION_SCOPE: 403,
  NOT_A_MEMBER: 403,
  FORBIDDEN_ROLE: 403,
  MEMBER_NOT_FOUND: 404,
  ALREADY_MEMBER: 409,
  LAST_OWNER: 409,
  INVITE_INVALID: 404,
  INVITE_EMAIL_MISMATCH: 403,
  RATE_LIMITED: 429,
  NOT_FOUND: 404,
  PROJECT_NOT_FOUND: 404,
  TOKEN_NOT_FOUND: 404,
  CONFLICT: 409,
  SLUG_TAKEN: 409,
  CR_NOT_FOUND: 404,
  CR_NOT_OPEN: 409,
  CR_MERGED: 409,
  CR_NOT_CLOSED: 409,
  MERGE_CONFLICT: 409,
  MERGE_REJECTED: 409,
  HEAD_MOVED: 409,
  CHECKS_NOT_PASSED: 409,
  APPROVAL_REQUIRED: 409,
  SELF_APPROVAL: 403,
  NO_CONFLICTS: 409,
  SAME_REF: 400,
  BRANCH_NOT_FOUND: 400,
  REPO_UNAVAILABLE: 502,
  REPO_URL_FORBIDDEN: 400,
  NOT_CONFIGURED: 503,
  SSO_FAILED: 400,
  SSO_REFUSED: 403,
  SSO_PROVIDER_UNAVAILABLE: 502,
  MODEL_NOT_CONFIGURED: 503,
  AGENT_NOT_FOUND: 400,
  SESSION_NOT_FOUND: 404,
  SESSION_ID_AMBIGUOUS: 400,
  SESSION_CAP_REACHED: 429,
  SESSION_NOT_RUNNING: 409,
  TRIGGER_NOT_FOUND: 404,
  TRIGGER_UNCHANGED: 409,
  CHANNEL_NOT_FOUND: 404,
  CHANNEL_TAKEN: 409,
  SIGNATURE_INVALID: 401,
  APP_NOT_FOUND: 404,
  APP_NO_PREVIOUS_REVISION: 409,
  APPS_DISABLED: 409,
  SANDBOX_UNREACHABLE: 502,
  SANDBOX_BACKEND_FAILED: 502,
  IMAGE_BUILD_FAILED: 422,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HEADERS_TOO_LARGE: 431,
  REQUEST_TIMEOUT: 408,
  UNAVAILABLE: 503,
  INTERNAL: 500,
};

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.status = STATUS[code];
  }
}

export const apiError = (code: ErrorCode, message: string, details?: Record<string, unknown>) =>
  new ApiError(code, message, details);

/** The orchestrator's failures as the API answers them. */
const FROM_ORCHESTRATOR: Record<OrchestratorErrorCode, ErrorCode> = {
  IMAGE_BUILD_FAILED: "IMAGE_BUILD_FAILED",
  SANDBOX_BACKEND_FAILED: "SANDBOX_BACKEND_FAILED",
};

export const fromOrchestrator = (err: OrchestratorError) => apiError(FROM_ORCHESTRATOR[err.code], err.message);
