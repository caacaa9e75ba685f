import type { FastifyRequest } from "fastify";
import type { AccountStore } from "../accounts/store.ts";
import type { AuditLog } from "./store.ts";

/**
 * The acts of signing in that the audit hook cannot see, since no signed-in person makes the request: a token
 * minted by a login (password or browser), and a person joining an account (an invite taken up, a sign-on by an
 * allowed domain). Each is the act of the person it is about.
 */
export function createSignInAudit(deps: { audit: AuditLog; accounts: Pick<AccountStore, "accounts"> }) {
  const request = (req: FastifyRequest | undefined) => ({
    requestId: req?.id ?? null,
    clientAddress: req?.ip ?? null,
  });
  return {
    /** A user token reaches every account of its user: recorded in each. */
    async tokenMinted(userId: string, tokenId: string, via: string, req: FastifyRequest): Promise<void> {
      await deps.audit.record({
        accountIds: (await deps.accounts.accounts(userId)).map((a) => a.id),
        actor: { userId, kind: "user" },
        action: "token.mint",
        resource: { type: "token", id: tokenId },
        projectId: null,
        ...request(req),
        status: 201,
        details: { via },
      });
    },

    async joined(userId: string, accountId: string, via: string, req?: FastifyRequest): Promise<void> {
      await deps.audit.record({
        accountIds: [accountId],
        actor: { userId, kind: "user" },
        action: "member.join",
        resource: { type: "member", id: userId },
        projectId: null,
        ...request(req),
        status: null,
        details: { via },
      });
    },
  };
}

export type SignInAudit = ReturnType<typeof createSignInAudit>;
