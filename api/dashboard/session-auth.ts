import type { FastifyReply, FastifyRequest } from "fastify";
import { apiError } from "../errors.ts";
import { type BrowserSession, type BrowserSessions, sameToken } from "./browser-sessions.ts";

export const SESSION_COOKIE = "svc_dashboard";
/**
 * The cookie goes to the dashboard's paths only: host-only (no Domain, so never to `<port>-<session>.<domain>`
 * preview origins) and Path=/dashboard, so never to `/v1/…`. SameSite=Strict: a page of another site, a preview's
 * included (`<label>.localhost` is same-site with `localhost`, but a link from it is a cross-site navigation
 * elsewhere), never gets it along with a navigation or a form.
 */
const COOKIE_PATH = "/dashboard";

declare module "fastify" {
  interface FastifyRequest {
    browserSession: BrowserSession | null;
  }
}

/** The value of cookie `name` in a Cookie header. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const pair of (header ?? "").split(";")) {
    const [key, ...value] = pair.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}

export const sessionCookieValue = (header: string | undefined) => cookieValue(header, SESSION_COOKIE);

export function sessionCookie(secret: string, maxAgeS: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${secret}; Path=${COOKIE_PATH}; Max-Age=${maxAgeS}; HttpOnly; SameSite=Strict${secure ? "; Secure" : ""}`;
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
 * Every request of the dashboard that is not a read must come from a page of the dashboard's own origin: the
 * browser says where a request comes from (`Origin`, `Sec-Fetch-Site`), and a preview page on a sibling host
 * (`3000-<session>.localhost` beside `localhost`) is same-site, so SameSite cookies alone do not stop it. A
 * client that sends neither header (curl, a script) is no browser: the CSRF token still binds its forms.
 */
export async function refuseOtherOrigins(req: FastifyRequest): Promise<void> {
  if (req.method === "GET" || req.method === "HEAD" || req.method === "OPTIONS") return;
  const site = req.headers["sec-fetch-site"];
  const origin = req.headers.origin;
  // By host: behind a TLS proxy the scheme this process sees is not the page's.
  const fromHere = origin !== undefined && URL.canParse(origin) && new URL(origin).host === req.headers.host;
  if ((site !== undefined && site !== "same-origin") || (origin !== undefined && !fromHere)) {
    throw apiError("FORBIDDEN", "This request came from another site; the dashboard only takes its own pages' forms.");
  }
}

/**
 * The preHandler of every state-changing form (after requireBrowserSession): its `_csrf` field must be the token
 * of this browser session, else 403. SameSite=Strict keeps cross-site posts cookie-less and refuseOtherOrigins
 * refuses other origins of this site; this is the third lock, for a client that sends no Origin.
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
