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
 * First start of a self-hosted stack: an admin user with their own account, holding the token whose hash
 * the CLI passed in. Later starts only make sure that token (and so the CLI's stored login) still works.
 */
export async function bootstrapAdmin(deps: { sql: Sql; accounts: AccountStore }, tokenHash: string): Promise<string> {
  const userId = await ensureAdminUser(deps.accounts);
  await deps.sql.query(
    `insert into tokens (user_id, name, token_hash, prefix) values ($1, 'self-host admin', $2, 'svc_pat_…')
     on conflict (token_hash) do update set revoked_at = null, expires_at = null`,
    [userId, tokenHash],
  );
  return userId;
}
