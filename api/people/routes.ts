import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { Email, InviteBody, type MemberList, PasswordLoginBody, RoleChangeBody } from "../../protocol/member.ts";
import type { SignInAudit } from "../audit/sign-ins.ts";
import { actingUserId } from "../auth/authenticate.ts";
import type { TokenStore } from "../auth/token-store.ts";
import { parseInput } from "../http/validate.ts";
import type { Members } from "./members.ts";
import type { PasswordSignIn } from "./password-sign-in.ts";

const MemberParams = z.object({ email: Email });

export type PeopleDeps = {
  members: Members;
  passwordSignIn: PasswordSignIn;
  tokens: TokenStore;
  signInAudit: SignInAudit;
};

/**
 * An account's members (account routes: user tokens only) and `svc login --email`'s password login, which mints a
 * user token as the browser login does.
 */
export function peopleRoutes(deps: PeopleDeps) {
  // The account the auth hook resolved and checked the route's role in (api/auth/authenticate.ts), never another.
  const account = (req: FastifyRequest) => req.account!;
  return async (app: FastifyInstance) => {
    app.get(
      "/v1/accounts/members",
      { config: { auth: "account" } },
      async (req): Promise<MemberList> => ({ members: await deps.members.list(account(req).id) }),
    );

    app.post("/v1/accounts/members/invites", { config: { auth: "account" } }, async (req, reply) => {
      const body = parseInput(InviteBody, req.body, "body");
      const invite = await deps.members.invite(account(req), actingUserId(req.principal!), body);
      return reply.code(201).send(invite);
    });

    app.patch("/v1/accounts/members/:email", { config: { auth: "account" } }, async (req) => {
      const { email } = parseInput(MemberParams, req.params, "params");
      const { role } = parseInput(RoleChangeBody, req.body, "body");
      return deps.members.changeRole(account(req), email, role);
    });

    app.delete("/v1/accounts/members/:email", { config: { auth: "account" } }, async (req, reply) => {
      const { email } = parseInput(MemberParams, req.params, "params");
      await deps.members.remove(account(req), email);
      return reply.code(204).send();
    });

    app.post("/v1/auth/password", { config: { auth: "public" } }, async (req, reply) => {
      const body = parseInput(PasswordLoginBody, req.body, "body");
      const userId = await deps.passwordSignIn.userId(body.email, body.password, req.ip);
      // A password login lives DEFAULT_TOKEN_DAYS, as a browser login does.
      const minted = await deps.tokens.mint({ userId, name: "cli (password login)" });
      await deps.signInAudit.tokenMinted(userId, minted.id, "password login", req);
      return reply.code(201).send(minted);
    });
  };
}
