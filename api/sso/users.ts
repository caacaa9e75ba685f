import { DisplayName, Email } from "../../protocol/member.ts";
import { installationAccount } from "../accounts/installation-account.ts";
import { isUniqueViolation } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import type { SsoIdentity } from "./provider.ts";

/**
 * The svc user a provider's identity signs in as: the user of that (issuer, subject) if there is one; else the user
 * of its email, which it is then tied to; else, for an email of an allowed domain, a new member of the installation's
 * account, and for an invited email a new user whom the invite's page then joins to its account. Every path needs an
 * email the provider has verified: an unverified one is anyone's to type.
 */
export function createSsoUsers(deps: {
  sql: Sql;
  allowedDomains: readonly string[];
  /** Told once a person joined an account by their email's domain, after the join committed. */
  onJoined?: (userId: string, accountId: string) => Promise<void>;
}) {
  const { sql } = deps;

  async function byIdentity(identity: SsoIdentity): Promise<string | undefined> {
    const [row] = await sql.query<{ user_id: string }>(
      "select user_id from user_identities where issuer = $1 and subject = $2",
      [identity.issuer, identity.subject],
    );
    return row?.user_id;
  }

  async function link(tx: Sql, userId: string, identity: SsoIdentity): Promise<void> {
    await tx.query("insert into user_identities (issuer, subject, user_id) values ($1, $2, $3)", [
      identity.issuer,
      identity.subject,
      userId,
    ]);
  }

  /** An invite for this email that still works (api/people/invites.ts): one way in besides an allowed domain. */
  async function invited(tx: Sql, email: string): Promise<boolean> {
    const rows = await tx.query(
      "select 1 from account_invites where email = $1 and used_at is null and expires_at > now() limit 1",
      [email],
    );
    return rows.length > 0;
  }

  async function findOrJoin(identity: SsoIdentity, email: string): Promise<string> {
    let joined: string | undefined;
    const userId = await sql.transaction(async (tx) => {
      const [existing] = await tx.query<{ id: string }>("select id from users where email = $1", [email]);
      if (existing) {
        const [other] = await tx.query("select 1 from user_identities where user_id = $1 and issuer = $2", [
          existing.id,
          identity.issuer,
        ]);
        // The provider gave this email to another of its people than the one who signed in as it before.
        if (other)
          throw apiError(
            "SSO_REFUSED",
            `${email} signs in here as another person of this provider. Ask an administrator of this installation.`,
          );
        await link(tx, existing.id, identity);
        return existing.id;
      }
      const domain = email.slice(email.lastIndexOf("@") + 1);
      const joinsByDomain = deps.allowedDomains.includes(domain);
      const accountId = joinsByDomain ? await installationAccount(tx) : undefined;
      // Someone invited gets a user whatever their domain: their invite's page, where `next` leads, joins them.
      if (!accountId && !(await invited(tx, email)))
        throw apiError(
          "SSO_REFUSED",
          joinsByDomain
            ? "This installation has no account to join yet: its administrator sets it up first."
            : `${email} has no user here, and people of ${domain} do not join by themselves. Ask an administrator of this installation for an invitation.`,
        );
      const name = DisplayName.safeParse(identity.name);
      const [user] = await tx.query<{ id: string }>("insert into users (email, name) values ($1, $2) returning id", [
        email,
        name.success ? name.data : email.slice(0, email.lastIndexOf("@")),
      ]);
      if (accountId) {
        await tx.query("insert into memberships (account_id, user_id, role) values ($1, $2, 'member')", [
          accountId,
          user!.id,
        ]);
        joined = accountId;
      }
      await link(tx, user!.id, identity);
      return user!.id;
    });
    if (joined) await deps.onJoined?.(userId, joined);
    return userId;
  }

  return {
    async userFor(identity: SsoIdentity): Promise<string> {
      const email = Email.safeParse(identity.email);
      if (!email.success || !identity.emailVerified)
        throw apiError(
          "SSO_REFUSED",
          email.success
            ? `The sign-in provider has not verified ${email.data}: svc signs people in by a verified email only. Verify it there, then sign in again.`
            : "The sign-in provider gave no email address svc can use: svc signs people in by a verified email only.",
        );
      const known = await byIdentity(identity);
      if (known) return known;
      try {
        return await findOrJoin(identity, email.data);
      } catch (err) {
        // The same person's first sign-in in two browsers at once: the other one made the user.
        const raced = isUniqueViolation(err) ? await byIdentity(identity) : undefined;
        if (!raced) throw err;
        return raced;
      }
    },
  };
}

export type SsoUsers = ReturnType<typeof createSsoUsers>;
