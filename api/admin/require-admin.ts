import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";

/** What acts on every account at once is the installation administrator's alone (the self-host admin user). */
export async function requireAdmin(sql: Sql, userId: string): Promise<void> {
  const [user] = await sql.query<{ is_admin: boolean }>("select is_admin from users where id = $1", [userId]);
  if (!user?.is_admin) throw apiError("FORBIDDEN", "only the installation's administrator may do this");
}
