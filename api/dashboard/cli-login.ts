import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { AccountStore } from "../accounts/store.ts";
import type { TokenStore } from "../auth/token-store.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { cliLoginPage } from "./pages/cli-login.ts";
import { requireCsrf } from "./session-auth.ts";

/**
 * Only the CLI's own one-shot server may receive a token: `http://127.0.0.1:<port>/callback` (or localhost).
 * Anything else would hand a signed-in browser's token to whoever wrote the link.
 */
const Callback = z
  .string()
  .max(200)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (
        url.protocol === "http:" &&
        ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) &&
        url.port !== "" &&
        url.pathname === "/callback" &&
        !url.search &&
        !url.username
      );
    } catch {
      return false;
    }
  }, "the callback must be the svc CLI's own http://127.0.0.1:<port>/callback");
const State = z.string().regex(/^[A-Za-z0-9_-]{16,128}$/, "the state must be the CLI's nonce");
const LoginQuery = z.object({ callback: Callback, state: State });
const LoginForm = z.object({ _csrf: z.string(), callback: Callback, state: State }).strict();

/** The page may send its form to the loopback callback (CSP `form-action` covers the redirect after the post). */
const LOGIN_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self' http://127.0.0.1:* http://localhost:* http://[::1]:*; frame-ancestors 'none'";

/**
 * `svc login`'s browser half (`/dashboard/cli/login?callback=…&state=…`): a signed-in person authorizes, a user
 * token is minted as `POST /v1/accounts/tokens` mints it, and the browser carries it to the CLI's callback with the
 * CLI's `state`, which the CLI checks.
 */
export function cliLoginPages(deps: { tokens: TokenStore; accounts: AccountStore; publicUrl: () => string }) {
  return async (app: FastifyInstance) => {
    app.get("/cli/login", async (req, reply) => {
      const query = parseInput(LoginQuery, req.query, "query");
      const me = await deps.accounts.me(req.browserSession!.userId);
      if (!me) throw apiError("NOT_FOUND", "this user has no account");
      const host = new URL(deps.publicUrl()).host;
      const view = { host, email: me.user.email, ...query };
      reply.header("content-security-policy", LOGIN_CSP);
      return reply.type("text/html; charset=utf-8").send(cliLoginPage(view, req.browserSession!.csrf));
    });

    app.post("/cli/login", { preHandler: requireCsrf }, async (req, reply) => {
      const form = parseInput(LoginForm, req.body, "body");
      const minted = await deps.tokens.mint({ userId: req.browserSession!.userId, name: "svc CLI (browser login)" });
      const target = new URL(form.callback);
      target.searchParams.set("state", form.state);
      target.searchParams.set("token", minted.token);
      return reply.redirect(target.toString(), 303);
    });
  };
}
