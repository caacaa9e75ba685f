import type { AccountRole } from "../../protocol/account.ts";
import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";

const INVITE_PREFIX = "svc_inv_";
/** An invite works once, for a week. */
export const INVITE_TTL_DAYS = 7;

/** The dashboard page an invite's link opens; the token is the last segment. */
export const invitePath = (token: string) => `/dashboard/invites/${token}`;
/** The token in an invite page's path (and in a sign-in's `next` leading back to it), for the log to hide. */
export const INVITE_PATH_TOKEN = /(\/dashboard\/invites\/|%2Fdashboard%2Finvites%2F)[^/?&#]+/gi;

export type OpenInvite = { accountId: string; account: string; email: string; role: AccountRole; expiresAt: string };

/** What an invite link is now: open, or why it no longer works (`account` names where it led). */
export type InviteLookup =
  | { state: "open"; invite: OpenInvite }
  | { state: "expired" | "used"; account: string }
  | { state: "unknown" };

/**
 * Who takes an invite up: a new user (the invite's email, this name and password), or a user already proven to be
 * its addressee (by their password or their signed-in browser), whose email must still be the invite's.
 */
export type Invitee = { kind: "new"; name: string; passwordHash: string } | { kind: "user"; userId: string };

type InviteRow = {
  account_id: string;
  account: string;
  email: string;
  role: AccountRole;
  expires_at: Date;
  used_at: Date | null;
  live: boolean;
};

async function lookup(sql: Pick<Sql, "query">, token: string): Promise<InviteLookup> {
  const [row] = await sql.query<InviteRow>(
    `select i.account_id, a.name as account, i.email, i.role, i.expires_at, i.used_at, i.expires_at > now() as live
       from account_invites i join accounts a on a.id = i.account_id where i.token_hash = $1`,
    [hashSecret(token)],
  );
  if (!row) return { state: "unknown" };
  if (row.used_at) return { state: "used", account: row.account };
  if (!row.live) return { state: "expired", account: row.account };
  const { account_id: accountId, account, email, role } = row;
  return { state: "open", invite: { accountId, account, email, role, expiresAt: iso(row.expires_at) } };
}

/** Why a link does not work (an open one found here was just taken by someone else), as its holder reads it. */
export function inviteRefusal(found: InviteLookup) {
  if (found.state === "unknown")
    return apiError(
      "INVITE_INVALID",
      "This invite link is not valid: check that you have all of it, or ask for a new one.",
    );
  if (found.state === "expired")
    return apiError(
      "INVITE_INVALID",
      `This invite to ${found.account} has expired: an invite works for ${INVITE_TTL_DAYS} days. Ask for a new one.`,
    );
  const account = found.state === "open" ? found.invite.account : found.account;
  return apiError(
    "INVITE_INVALID",
    `This invite to ${account} was already used: an invite works once. Sign in, or ask for a new one.`,
  );
}

/** One-time invitations into an account, bound to one email; only a hash of each link's token is stored. */
export function createInvites(deps: { sql: Sql; publicUrl: () => string }) {
  const { sql } = deps;
  return {
    /** A new invite (an earlier open one for the same email and account stops working): its one-time URL. */
    async create(input: { accountId: string; email: string; role: AccountRole; createdBy: string }) {
      const token = newSecret(INVITE_PREFIX);
      const expiresAt = new Date(Date.now() + INVITE_TTL_DAYS * 86_400_000);
      await sql.transaction(async (tx) => {
        await tx.query("delete from account_invites where account_id = $1 and email = $2 and used_at is null", [
          input.accountId,
          input.email,
        ]);
        await tx.query(
          `insert into account_invites (token_hash, account_id, email, role, created_by, expires_at)
             values ($1, $2, $3, $4, $5, $6)`,
          [hashSecret(token), input.accountId, input.email, input.role, input.createdBy, expiresAt],
        );
      });
      return { url: deps.publicUrl() + invitePath(token), expiresAt: iso(expiresAt) };
    },

    lookup: (token: string) => lookup(sql, token),

    /**
     * Takes the invite up, all or nothing: the user (when new), the membership with the invite's role, the invite
     * marked used. An invite used, expired or unknown, or a user of another email, creates nothing.
     */
    accept(token: string, invitee: Invitee): Promise<{ userId: string; accountId: string }> {
      return sql.transaction(async (tx) => {
        const [invite] = await tx.query<{ id: string; account_id: string; email: string; role: AccountRole }>(
          `update account_invites set used_at = now()
            where token_hash = $1 and used_at is null and expires_at > now()
            returning id, account_id, email, role`,
          [hashSecret(token)],
        );
        if (!invite) throw inviteRefusal(await lookup(tx, token));
        let userId: string;
        if (invitee.kind === "new") {
          const [taken] = await tx.query("select 1 from users where lower(email) = $1", [invite.email]);
          if (taken)
            throw apiError("CONFLICT", `${invite.email} already has a user here: accept the invite as that user`);
          const [user] = await tx.query<{ id: string }>(
            "insert into users (email, name, password_hash) values ($1, $2, $3) returning id",
            [invite.email, invitee.name, invitee.passwordHash],
          );
          userId = user!.id;
        } else {
          const [user] = await tx.query<{ email: string }>("select email from users where id = $1", [invitee.userId]);
          if (user?.email.toLowerCase() !== invite.email)
            throw apiError(
              "INVITE_EMAIL_MISMATCH",
              `This invite is for ${invite.email}, not ${user?.email ?? "this user"}: only that person can accept it.`,
            );
          userId = invitee.userId;
        }
        // Someone who became a member meanwhile keeps the role they have: an invite never changes a role.
        await tx.query(
          "insert into memberships (account_id, user_id, role) values ($1, $2, $3) on conflict do nothing",
          [invite.account_id, userId, invite.role],
        );
        await tx.query("update account_invites set used_by = $2 where id = $1", [invite.id, userId]);
        return { userId, accountId: invite.account_id };
      });
    },
  };
}

export type Invites = ReturnType<typeof createInvites>;
