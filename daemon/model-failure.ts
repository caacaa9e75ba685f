import type { RuntimeEvent } from "./agent-events.ts";

/** A run the model gateway made fail: which agent session, what to tell the person, and whether to abort it. */
export type ModelFailure = { session: string; message: string; abort: boolean };

/** opencode's words when the provider's HTTP call never connected (observed: "Cannot connect to API: ..."). */
const UNREACHABLE =
  /cannot connect to api|unable to connect|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|fetch failed/i;

/** The gateway's URL as a person may see it: no user info, query or fragment (they can carry keys). */
export function displayUrl(url: string | undefined): string {
  if (!url) return "(none)";
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
  } catch {
    return "(an invalid URL)";
  }
}

type ApiErrorData = { message?: string; statusCode?: number };

/**
 * The model gateway's part in a runtime event, in the person's terms. opencode reports an HTTP error of the
 * gateway (401 and the like, not retried) as `session.error` with `data.statusCode`; a gateway it cannot connect
 * to it retries with a growing backoff (`session.status` `retry`, for minutes): that is a failure at once, and
 * the run is aborted so it stops retrying.
 */
export function modelFailure(event: RuntimeEvent, gatewayUrl: string | undefined): ModelFailure | undefined {
  const p = event.properties ?? {};
  const session = typeof p.sessionID === "string" ? p.sessionID : undefined;
  if (!session) return undefined;
  if (event.type === "session.status") {
    const status = p.status as { type?: string; message?: string } | undefined;
    if (status?.type !== "retry" || !UNREACHABLE.test(status.message ?? "")) return undefined;
    return {
      session,
      message: `the model gateway at ${displayUrl(gatewayUrl)} cannot be reached (${status.message})`,
      abort: true,
    };
  }
  if (event.type === "session.error") {
    const error = p.error as { name?: string; data?: ApiErrorData } | undefined;
    const code = error?.data?.statusCode;
    if (error?.name !== "APIError" || typeof code !== "number") return undefined;
    const detail = error.data?.message ? `: ${error.data.message}` : "";
    const what =
      code === 401
        ? "the model gateway refused the API key (401)"
        : code === 403
          ? "the model gateway refused access (403)"
          : `the model gateway answered ${code}`;
    return { session, message: `${what}${detail}`, abort: false };
  }
  return undefined;
}
