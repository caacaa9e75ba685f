import { isUniqueViolation } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import type { AccountStore } from "./store.ts";

export const ADMIN_EMAIL = "admin@selfhost.local";

async function ensureAdminUser(accounts: AccountStore): Promise<string> {
  const existing = await accounts.findUserByEmail(ADMIN_EMAIL);
  if (existing) return existing.id;
  try {
    const created = await accounts.createUserWithAccount({
      email: ADMIN_EMAIL,
      name: "admin",
      accountSlug: "admin",
      isAdmin: true,
    });
    return created.userId;
  } catch (err) {
    // Another replica bootstrapped at the same moment.
    const raced = isUniqueViolation(err) ? await accounts.findUserByEmail(ADMIN_EMAIL) : undefined;
    if (!raced) throw err;
    return raced.id;
  }
}

/**
 * The admin token expires like every token, but it is the login of the machine's own CLI (and what `self-host
 * stop` and `status` use): each API start renews it for this long, so only a stack left running for a year
 * without a restart outlives it (`svc self-host restart` renews it then).
 */
export const ADMIN_TOKEN_DAYS = 365;

/**
 * First start of a self-hosted stack: an admin user with their own account, holding the token whose hash
 * the CLI passed in. Later starts only make sure that token (and so the CLI's stored login) still works.
 */
export async function bootstrapAdmin(deps: { sql: Sql; accounts: AccountStore }, tokenHash: string): Promise<string> {
  const userId = await ensureAdminUser(deps.accounts);
  await deps.sql.query(
    `insert into tokens (user_id, name, token_hash, prefix, expires_at)
       values ($1, 'self-host admin', $2, 'svc_pat_…', now() + make_interval(days => $3))
     on conflict (token_hash) do update set revoked_at = null, expires_at = excluded.expires_at`,
    [userId, tokenHash, ADMIN_TOKEN_DAYS],
  );
  return userId;
}
