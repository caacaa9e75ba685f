import type { Sql } from "../db/sql.ts";

/**
 * The installation's own account: the oldest one its administrator (the self-host admin that bootstrapAdmin makes
 * at the first start) owns. Where people who join by themselves, through single sign-on from an allowed email
 * domain, become members. Undefined on a database no self-host start has bootstrapped.
 */
export async function installationAccount(sql: Sql): Promise<string | undefined> {
  const [row] = await sql.query<{ id: string }>(
    `select a.id from accounts a
       join memberships m on m.account_id = a.id
       join users u on u.id = m.user_id
     where u.is_admin and m.role = 'owner'
     order by a.created_at, a.id
     limit 1`,
  );
  return row?.id;
}
