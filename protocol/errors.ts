import { z } from "zod";

/** Stable machine-readable codes; the HTTP status of each lives with the API's error catalogue. */
export const ErrorCode = z.enum([
  "BAD_REQUEST",
  "VALIDATION_FAILED",
  "UNAUTHENTICATED",
  "TOKEN_EXPIRED",
  "FORBIDDEN",
  "TOKEN_PROJECT_MISMATCH",
  "PROJECT_TOKEN_NOT_ALLOWED",
  "SERVICE_KEY_NOT_ALLOWED",
  /** A session's own token (SVC_CLI_TOKEN) used on another session, or to start one: it acts on its session only. */
  "SESSION_SCOPE",
  "NOT_A_MEMBER",
  /** The caller's role in the account is below what the action takes (viewer < member < admin < owner). */
  "FORBIDDEN_ROLE",
  /** No member of the account has that email. */
  "MEMBER_NOT_FOUND",
  /** An invite for someone who is a member already. */
  "ALREADY_MEMBER",
  /** A removal or demotion that would leave the account without an owner. */
  "LAST_OWNER",
  /** An invite link that is unknown, expired or used: nothing was created. */
  "INVITE_INVALID",
  /** An invite accepted by a user whose email is not the one it was sent to. */
  "INVITE_EMAIL_MISMATCH",
  /** Too many sign-in tries for an email or from an address in the last minute. */
  "RATE_LIMITED",
  "NOT_FOUND",
  "PROJECT_NOT_FOUND",
  /** No token of this user by that id (another user's is answered the same way). */
  "TOKEN_NOT_FOUND",
  "CONFLICT",
  "SLUG_TAKEN",
  "CR_NOT_FOUND",
  "CR_NOT_OPEN",
  "CR_MERGED",
  "CR_NOT_CLOSED",
  "MERGE_CONFLICT",
  "MERGE_REJECTED",
  /** A merge that names the head its person reviewed (`head_sha`) found the branch elsewhere: nothing merged. */
  "HEAD_MOVED",
  "CHECKS_NOT_PASSED",
  /** A merge of a CR with fewer approvals of its current head than `[review] required_approvals` asks for. */
  "APPROVAL_REQUIRED",
  /** An approval of a CR by its own author: approvals come from other members. */
  "SELF_APPROVAL",
  /** `svc cr resolve` of a CR whose branches merge cleanly: nothing for the agent to resolve. */
  "NO_CONFLICTS",
  "SAME_REF",
  "BRANCH_NOT_FOUND",
  "REPO_UNAVAILABLE",
  /** A repository URL whose host is, or resolves to, a loopback, private, link-local or metadata address. */
  "REPO_URL_FORBIDDEN",
  "NOT_CONFIGURED",
  /** A single sign-on that does not check out (expired, used, begun in another browser, a bad answer): nobody signed in. */
  "SSO_FAILED",
  /** The OpenID provider vouches for someone svc does not let in (email unverified, outside the allowed domains). */
  "SSO_REFUSED",
  /** The OpenID provider did not answer, or its configuration (discovery) is unusable. */
  "SSO_PROVIDER_UNAVAILABLE",
  /** No model gateway: an agent cannot answer until the installation has one. */
  "MODEL_NOT_CONFIGURED",
  /** A prompt for an agent the session's runtime does not define (its message names those it does). */
  "AGENT_NOT_FOUND",
  "SESSION_NOT_FOUND",
  /** A session id prefix that several sessions start with: the message names them (the CLI exits 2). */
  "SESSION_ID_AMBIGUOUS",
  "SESSION_CAP_REACHED",
  "SESSION_NOT_RUNNING",
  "TRIGGER_NOT_FOUND",
  "TRIGGER_UNCHANGED",
  "CHANNEL_NOT_FOUND",
  "CHANNEL_TAKEN",
  /** An Events API request whose signature or timestamp does not check out. */
  "SIGNATURE_INVALID",
  "APP_NOT_FOUND",
  /** Rollback asked for with no earlier live revision to return to. */
  "APP_NO_PREVIOUS_REVISION",
  /** SVC_APP_PROVIDER=none: apps are listed, never deployed. */
  "APPS_DISABLED",
  "SANDBOX_UNREACHABLE",
  "SANDBOX_BACKEND_FAILED",
  "IMAGE_BUILD_FAILED",
  "PAYLOAD_TOO_LARGE",
  "UNSUPPORTED_MEDIA_TYPE",
  "HEADERS_TOO_LARGE",
  "REQUEST_TIMEOUT",
  /** Compose mode's edge: no API replica answers (yet); try again shortly. */
  "UNAVAILABLE",
  "INTERNAL",
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

/**
 * Codes only the sandbox daemon answers with (its catalogue is daemon/errors.ts): the API never raises them, but
 * a daemon's body it relays to a client may carry one.
 */
export const SandboxErrorCode = z.enum([
  /** The agent runtime is booting, restarting or not serving: try again shortly. */
  "AGENT_RUNTIME_UNAVAILABLE",
  /** A sandbox port or the agent runtime behind the daemon did not answer, or answered unusably. */
  "UPSTREAM_UNAVAILABLE",
  "METHOD_NOT_ALLOWED",
]);
export type SandboxErrorCode = z.infer<typeof SandboxErrorCode>;

/** Every non-2xx JSON body the API and the sandbox daemon send. Extra keys carry details (e.g. `field`, `limit`). */
export const ErrorBody = z
  .object({
    error: z.string(),
    code: z.string(),
    field: z.string().optional(),
  })
  .loose();
export type ErrorBody = z.infer<typeof ErrorBody>;
