import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { DEFAULT_TOKEN_DAYS } from "../../protocol/token.ts";
import type { AccountStore } from "../accounts/store.ts";
import type { SignInAudit } from "../audit/sign-ins.ts";
import type { TokenStore } from "../auth/token-store.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { cliLoginPage } from "./pages/cli-login.ts";
import { contentSecurityPolicy } from "./security-headers.ts";
import { requireCsrf } from "./session-auth.ts";

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** The CLI's one-shot callback (cli/commands/auth.ts): plain HTTP on a loopback port, nothing else. */
const Callback = z.string().refine((value) => {
  try {
    const url = new URL(value);
    return url.protocol === "http:" && LOOPBACK.has(url.hostname) && url.port !== "" && url.pathname === "/callback";
  } catch {
    return false;
  }
}, "must be the svc CLI's http://127.0.0.1:<port>/callback");
const State = z.string().regex(/^[A-Za-z0-9_-]{16,128}$/, "must be the svc CLI's state nonce");
const LoginQuery = z.object({ callback: Callback, state: State });
const LoginForm = z.object({ _csrf: z.string(), callback: Callback, state: State }).strict();

/**
 * The callback never points at this API: on the machine that runs it (or its proxy), an authorize click would send
 * the new token to the API itself, into its logs or a page of its own. Refused: the port the request came in on
 * (the API's own, behind a proxy too), the public URL's and the browser's `Host` port (the front the browser
 * reaches, a proxy's included), and privileged ports, which the CLI's ephemeral port never is. Refusing them
 * whether or not the browser shares the API's machine costs nothing: the CLI cannot have bound them there.
 */
function checkCallbackPort(callback: string, req: FastifyRequest, publicUrl: string): void {
  const port = new URL(callback).port;
  const hostPort = URL.canParse(`http://${req.headers.host}`) ? new URL(`http://${req.headers.host}`).port : "";
  const publicPort = new URL(publicUrl).port || (publicUrl.startsWith("https:") ? "443" : "80");
  if (Number(port) < 1024 || [String(req.socket.localPort), publicPort, hostPort].includes(port)) {
    throw apiError("VALIDATION_FAILED", "callback: must be the svc CLI's own port, not the API's or a privileged one", {
      field: "callback",
    });
  }
}

/**
 * `svc login` without `--token`: the CLI opens `/dashboard/cli/login?callback=…&state=…`; a signed-in person's
 * Authorize mints a user token and sends it, with the CLI's state, to the CLI's loopback callback. Registered in
 * the signed-in scope of the dashboard.
 */
export function cliLoginRoutes(deps: {
  tokens: TokenStore;
  accounts: AccountStore;
  publicUrl: () => string;
  signInAudit: SignInAudit;
}) {
  return async (app: FastifyInstance) => {
    app.get("/cli/login", async (req, reply) => {
      const query = parseInput(LoginQuery, req.query, "query");
      checkCallbackPort(query.callback, req, deps.publicUrl());
      const me = await deps.accounts.me(req.browserSession!.userId);
      if (!me) throw apiError("UNAUTHENTICATED", "this browser's user no longer exists; sign in again");
      const host = new URL(deps.publicUrl()).host;
      const page = cliLoginPage({
        host,
        user: me.user,
        accounts: me.accounts.map((a) => a.name),
        days: DEFAULT_TOKEN_DAYS,
        ...query,
        csrf: req.browserSession!.csrf,
      });
      // Authorize's form ends in a redirect to the CLI's origin: this page's form-action must allow that one.
      reply.header("content-security-policy", contentSecurityPolicy(new URL(query.callback).origin));
      return reply.type("text/html; charset=utf-8").send(page);
    });

    app.post("/cli/login", { preHandler: requireCsrf }, async (req, reply) => {
      const form = parseInput(LoginForm, req.body, "body");
      checkCallbackPort(form.callback, req, deps.publicUrl());
      // A browser login lives DEFAULT_TOKEN_DAYS, the token store's default.
      const userId = req.browserSession!.userId;
      const { id, token } = await deps.tokens.mint({ userId, name: "cli (browser login)" });
      await deps.signInAudit.tokenMinted(userId, id, "browser login", req);
      const target = new URL(form.callback);
      target.search = new URLSearchParams({ state: form.state, token }).toString();
      return reply.redirect(target.toString(), 303);
    });
  };
}
