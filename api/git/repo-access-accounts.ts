import type { Sql } from "../db/sql.ts";

/**
 * Which accounts the stack-wide repository credential (SVC_REPO_ACCESS_TOKEN or the GitHub App) serves: those
 * SVC_REPO_ACCESS_ACCOUNTS names, by slug or id (an empty list: none). Unset, the accounts the installation's
 * administrator owns, so a single-team self-host works out of the box while an account someone else signs up
 * for never reaches what the admin's credential can read.
 */
export function repoAccessAccounts(sql: Sql, names: readonly string[] | undefined) {
  return async (accountId: string): Promise<boolean> => {
    if (names) {
      const [account] = await sql.query<{ id: string; slug: string }>("select id, slug from accounts where id = $1", [
        accountId,
      ]);
      return account !== undefined && (names.includes(account.id) || names.includes(account.slug.toLowerCase()));
    }
    const [owned] = await sql.query(
      `select 1 from memberships m join users u on u.id = m.user_id
       where m.account_id = $1 and m.role = 'owner' and u.is_admin`,
      [accountId],
    );
    return owned !== undefined;
  };
}
