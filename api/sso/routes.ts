import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { BROWSER_SESSION_TTL_MS, type BrowserSessions } from "../dashboard/browser-sessions.ts";
import { html } from "../dashboard/html.ts";
import { dashboardPath } from "../dashboard/next-path.ts";
import { errorPage } from "../dashboard/pages/messages.ts";
import { ssoSignedInPage } from "../dashboard/pages/sso.ts";
import { SECURITY_HEADERS } from "../dashboard/security-headers.ts";
import { cookieValue, sessionCookie } from "../dashboard/session-auth.ts";
import { ApiError, apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { newSignInChecks, SSO_CALLBACK_PATH } from "./provider.ts";
import { SSO_SIGN_IN_TTL_MS } from "./sign-ins.ts";
import type { Sso } from "./sso.ts";

const HTML = "text/html; charset=utf-8";
const SIGN_IN_COOKIE = "svc_sso";
const SIGN_IN_COOKIE_PATH = "/auth/oidc";
const StartQuery = z.object({ next: z.string().max(2000).optional() });

/**
 * The browser's half of a sign-in under way: host-only, HttpOnly, for the two SSO paths only. SameSite=Lax, not
 * Strict: the provider's redirect back is a cross-site navigation, and it must carry this cookie.
 */
function signInCookie(handle: string, maxAgeS: number, secure: boolean): string {
  return `${SIGN_IN_COOKIE}=${handle}; Path=${SIGN_IN_COOKIE_PATH}; Max-Age=${maxAgeS}; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`;
}

const TRY_AGAIN = html`<p><a href="/dashboard/sign-in">Sign in again</a></p>`;

/**
 * "Sign in with SSO": `GET /auth/oidc/start[?next=/dashboard/…]` sends the browser to the provider with a fresh
 * state, nonce and PKCE challenge, bound to this browser by a cookie; `GET /auth/oidc/callback` takes the provider's
 * answer back, once, signs the person in with the dashboard's session cookie and goes on to `next`. Pages, not JSON:
 * a browser is on the other end of both.
 */
export function ssoRoutes(deps: { sso: Sso | undefined; browserSessions: BrowserSessions; publicUrl: () => string }) {
  const secure = () => deps.publicUrl().startsWith("https:");

  function configured(): Sso {
    if (!deps.sso)
      throw apiError(
        "NOT_CONFIGURED",
        "Single sign-on is not configured on this installation (SVC_OIDC_ISSUER, SVC_OIDC_CLIENT_ID, SVC_OIDC_CLIENT_SECRET).",
      );
    return deps.sso;
  }

  function renderError(err: FastifyError | ApiError, req: FastifyRequest, reply: FastifyReply) {
    if (err instanceof ApiError) {
      // The reason only: never the request's URL, which carries the provider's code.
      req.log.warn({ code: err.code, reason: err.message }, "single sign-on refused");
      const title = err.code === "SSO_REFUSED" ? "Not signed in" : "Sign-in failed";
      return reply
        .code(err.status)
        .type(HTML)
        .send(errorPage(title, err.message, undefined, TRY_AGAIN));
    }
    req.log.error({ err }, "single sign-on failed");
    return reply
      .code(500)
      .type(HTML)
      .send(errorPage("Sign-in failed", "Internal error: the server's log has the details.", undefined, TRY_AGAIN));
  }

  return async (app: FastifyInstance) => {
    app.addHook("onSend", async (_req, reply) => {
      for (const [name, value] of Object.entries(SECURITY_HEADERS))
        if (!reply.hasHeader(name)) reply.header(name, value);
    });
    app.setErrorHandler(renderError);

    app.get("/auth/oidc/start", { config: { auth: "public" } }, async (req, reply) => {
      const { provider, signIns } = configured();
      const { next } = parseInput(StartQuery, req.query, "query");
      const checks = newSignInChecks();
      const url = await provider.authorizationUrl(checks);
      const handle = await signIns.begin({ ...checks, next: dashboardPath(next ?? "") ?? "/dashboard" });
      reply.header("set-cookie", signInCookie(handle, SSO_SIGN_IN_TTL_MS / 1000, secure()));
      return reply.redirect(url.href, 303);
    });

    app.get(SSO_CALLBACK_PATH, { config: { auth: "public" } }, async (req, reply) => {
      const { provider, signIns, users } = configured();
      // Whatever comes of it, this browser's sign-in is over; and the page's links never pass the code on.
      reply.header("set-cookie", signInCookie("", 0, secure())).header("referrer-policy", "no-referrer");
      const handle = cookieValue(req.headers.cookie, SIGN_IN_COOKIE);
      const pending = handle ? await signIns.take(handle) : undefined;
      if (!pending)
        throw apiError(
          "SSO_FAILED",
          "This sign-in has expired or was used already, or it began in another browser. Sign in again.",
        );
      const query = req.url.includes("?") ? req.url.slice(req.url.indexOf("?")) : "";
      const identity = await provider.identify(query, pending);
      const userId = await users.userFor(identity);
      const { secret } = await deps.browserSessions.open(userId);
      reply.header("set-cookie", sessionCookie(secret, BROWSER_SESSION_TTL_MS / 1000, secure()));
      return reply.type(HTML).send(ssoSignedInPage(pending.next));
    });
  };
}
