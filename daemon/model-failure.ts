import type { RuntimeEvent } from "./agent-client.ts";

/**
 * A run the model gateway made fail: which agent session, what to tell the person, whether to abort it, and the
 * runtime's own words (for the daemon's log, not the person).
 */
export type ModelFailure = { session: string; message: string; abort: boolean; raw: string };

/** opencode's words when the provider's HTTP call never connected (observed: "Cannot connect to API: ..."). */
const UNREACHABLE =
  /cannot connect to api|unable to connect|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|fetch failed/i;

/**
 * opencode's words when the gateway sent nothing for its provider's `headerTimeout` ("Provider response headers
 * timed out after 120000ms") or `chunkTimeout` ("SSE read timed out") (opencode.ts sets both from
 * SVC_MODEL_TIMEOUT_S). It retries those too, each attempt waiting the whole timeout again.
 */
const STALLED = /provider response headers timed out|sse read timed out/i;

/** The stall's message: the gateway and the seconds waited (the setting's, else what opencode's words say). */
export function stalled(gatewayUrl: string | undefined, timeoutS: number | undefined, raw = ""): string {
  const ms = /after (\d+) ?ms/i.exec(raw)?.[1];
  const seconds = timeoutS ?? (ms ? Math.round(Number(ms) / 1000) : undefined);
  const waited = seconds === undefined ? "for too long" : `for ${seconds} s`;
  return `the model gateway at ${displayUrl(gatewayUrl)} sent nothing ${waited}; the turn was stopped`;
}

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
 * to, or one that sent nothing for `timeoutS` (SVC_MODEL_TIMEOUT_S), it retries with a growing backoff
 * (`session.status` `retry`, for minutes, up to six times the timeout for a stalled one): that is a failure at
 * once, and the run is aborted so it stops retrying.
 */
export function modelFailure(
  event: RuntimeEvent,
  gatewayUrl: string | undefined,
  timeoutS?: number,
): ModelFailure | undefined {
  const p = event.properties ?? {};
  const session = typeof p.sessionID === "string" ? p.sessionID : undefined;
  if (!session) return undefined;
  if (event.type === "session.status") {
    const status = p.status as { type?: string; message?: string } | undefined;
    const raw = status?.message ?? "";
    if (status?.type !== "retry") return undefined;
    if (STALLED.test(raw)) return { session, message: stalled(gatewayUrl, timeoutS, raw), abort: true, raw };
    if (!UNREACHABLE.test(raw)) return undefined;
    return {
      session,
      message: `the model gateway at ${displayUrl(gatewayUrl)} cannot be reached (${raw})`,
      abort: true,
      raw,
    };
  }
  if (event.type === "session.error") {
    const error = p.error as { name?: string; data?: ApiErrorData } | undefined;
    const raw = error?.data?.message ?? error?.name ?? "";
    // A stall opencode gave up retrying, or did not retry: no abort needed, the run is over.
    if (STALLED.test(raw)) return { session, message: stalled(gatewayUrl, timeoutS, raw), abort: false, raw };
    const code = error?.data?.statusCode;
    if (error?.name !== "APIError" || typeof code !== "number") return undefined;
    const detail = error.data?.message ? `: ${error.data.message}` : "";
    const what =
      code === 401
        ? "the model gateway refused the API key (401)"
        : code === 403
          ? "the model gateway refused access (403)"
          : `the model gateway answered ${code}`;
    return { session, message: `${what}${detail}`, abort: false, raw };
  }
  return undefined;
}
