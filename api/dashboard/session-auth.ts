import type { FastifyReply, FastifyRequest } from "fastify";
import { apiError } from "../errors.ts";
import { type BrowserSession, type BrowserSessions, sameToken } from "./browser-sessions.ts";

export const SESSION_COOKIE = "svc_dashboard";
/**
 * The cookie goes to the dashboard's paths only: host-only (no Domain, so never to `<port>-<session>.<domain>`
 * preview origins) and Path=/dashboard, so never to `/v1/…`, whose preview routes forward cookies to sandboxes.
 */
const COOKIE_PATH = "/dashboard";

declare module "fastify" {
  interface FastifyRequest {
    browserSession: BrowserSession | null;
  }
}

export function sessionCookieValue(header: string | undefined): string | undefined {
  for (const pair of (header ?? "").split(";")) {
    const [name, ...value] = pair.trim().split("=");
    if (name === SESSION_COOKIE) return value.join("=");
  }
  return undefined;
}

export function sessionCookie(secret: string, maxAgeS: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${secret}; Path=${COOKIE_PATH}; Max-Age=${maxAgeS}; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`;
}

export const clearedSessionCookie = (secure: boolean) => sessionCookie("", 0, secure);

/** Where a browser without a session is sent: the page that says how to get a sign-in link, then back here. */
export const signInPath = (next: string) => `/dashboard/sign-in?next=${encodeURIComponent(next)}`;

/**
 * The preHandler of every signed-in dashboard page: the browser session from the cookie, else a redirect to the
 * sign-in page (303, so a refused form post becomes a GET there).
 */
export function requireBrowserSession(sessions: BrowserSessions) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const secret = sessionCookieValue(req.headers.cookie);
    const session = secret ? await sessions.lookup(secret) : undefined;
    if (!session) return reply.redirect(signInPath(req.method === "GET" ? req.url : "/dashboard"), 303);
    req.browserSession = session;
  };
}

/**
 * The preHandler of every state-changing form (after requireBrowserSession): its `_csrf` field must be the token
 * of this browser session, else 403. SameSite=Lax already keeps cross-site posts cookie-less; this is the
 * second lock, for same-site origins that are not ours.
 */
export async function requireCsrf(req: FastifyRequest): Promise<void> {
  const sent = (req.body as { _csrf?: unknown } | undefined)?._csrf;
  if (typeof sent !== "string" || !req.browserSession || !sameToken(sent, req.browserSession.csrf)) {
    throw apiError(
      "FORBIDDEN",
      "This form has expired or did not come from this dashboard. Reload the page and try again.",
    );
  }
}
