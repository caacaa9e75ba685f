import type { Sql } from "../db/sql.ts";

/**
 * The URL a live (provisioning or active) sandbox's row holds, which the API replica its link reached wrote there:
 * how a replica waiting for a link that went to another learns where it is (registry.ts `linkedUrl`). One read by
 * primary key, made only while a wait runs.
 */
export function linkedUrlOf(sql: Sql) {
  return async (sandboxId: string): Promise<string | undefined> => {
    const [row] = await sql.query<{ url: string | null }>(
      "select url from session_sandboxes where sandbox_id = $1 and status in ('provisioning', 'active')",
      [sandboxId],
    );
    return row?.url ?? undefined;
  };
}
