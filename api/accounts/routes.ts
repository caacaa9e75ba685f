import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { MintUserTokenBody, type TokenList } from "../../protocol/token.ts";
import { actingUserId } from "../auth/authenticate.ts";
import type { TokenStore } from "../auth/token-store.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { activeAccount, namedAccount } from "../people/active-account.ts";
import type { AccountStore } from "./store.ts";

const TokenParams = z.object({ tokenId: z.uuid() });

export function accountRoutes(deps: { accounts: AccountStore; tokens: TokenStore }) {
  return async (app: FastifyInstance) => {
    // `account`: the active one, which ACCOUNT_HEADER chooses (`svc accounts use`, shown by `svc whoami`).
    app.get("/v1/accounts/me", { config: { auth: "account" } }, async (req) => {
      const userId = actingUserId(req.principal!);
      const me = await deps.accounts.me(userId);
      if (!me) throw apiError("NOT_FOUND", "this user has no account");
      return { ...me, account: await activeAccount(deps.accounts, userId, namedAccount(req)) };
    });

    app.post("/v1/accounts/tokens", { config: { auth: "account" } }, async (req, reply) => {
      const body = parseInput(MintUserTokenBody, req.body ?? {}, "body");
      const minted = await deps.tokens.mint({
        userId: actingUserId(req.principal!),
        name: body.name ?? "cli",
        expiresInDays: body.expires_in_days,
      });
      return reply.code(201).send(minted);
    });

    app.get(
      "/v1/accounts/tokens",
      { config: { auth: "account" } },
      async (req): Promise<TokenList> => ({
        tokens: await deps.tokens.listForUser(actingUserId(req.principal!)),
      }),
    );

    app.delete("/v1/accounts/tokens/:tokenId", { config: { auth: "account" } }, async (req, reply) => {
      const { tokenId } = parseInput(TokenParams, req.params, "params");
      // Another user's token is answered as one that does not exist: ids of others' tokens stay unconfirmed.
      if (!(await deps.tokens.revokeForUser(actingUserId(req.principal!), tokenId)))
        throw apiError("TOKEN_NOT_FOUND", `token ${tokenId} not found`);
      return reply.code(204).send();
    });
  };
}
