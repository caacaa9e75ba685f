import type { FastifyInstance } from "fastify";
import { hashSecret } from "../../protocol/credential.ts";
import { SignInLinkBody } from "../../protocol/dashboard.ts";
import { personalUserId } from "../auth/authenticate.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { BrowserSessions } from "./browser-sessions.ts";
import { dashboardPath } from "./next-path.ts";

/** `next` in a query, readable: slashes stay as they are. */
const queryPath = (path: string) => encodeURIComponent(path).replace(/%2F/g, "/");

/**
 * The user a sign-in link's code would sign in, without using it up: the page that asks before signing a browser
 * in names that user. Undefined for a used, expired or unknown code.
 */
export async function signInCodeUser(sql: Sql, code: string): Promise<string | undefined> {
  const [row] = await sql.query<{ user_id: string }>(
    "select user_id from dashboard_sign_in_codes where code_hash = $1 and expires_at > now()",
    [hashSecret(code)],
  );
  return row?.user_id;
}

/**
 * The CLI's way into the dashboard (`svc projects open`): a user token buys a one-time link for a browser. A
 * project token buys none: a browser session is a person's, as merging is.
 */
export function signInLinkRoutes(deps: { browserSessions: BrowserSessions; publicUrl: () => string }) {
  return async (app: FastifyInstance) => {
    app.post("/v1/dashboard/sign-in-links", { config: { auth: "principal" } }, async (req, reply) => {
      const userId = personalUserId(req.principal!, "sign a browser in to the dashboard");
      const body = parseInput(SignInLinkBody, req.body ?? {}, "body");
      const next = dashboardPath(body.next);
      if (!next) throw apiError("VALIDATION_FAILED", "next: must be a /dashboard path", { field: "next" });
      const code = await deps.browserSessions.mintCode(userId);
      const url = `${deps.publicUrl()}/dashboard/sign-in?code=${code}&next=${queryPath(next)}`;
      return reply.code(201).send({ url });
    });
  };
}
