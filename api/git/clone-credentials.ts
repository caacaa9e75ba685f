import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { CLONE_CREDENTIAL_PREFIX } from "../../protocol/token.ts";
import type { Sql } from "../db/sql.ts";

/** Minutes-long: the daemon's credential helper fetches a new one whenever git asks. */
export const CLONE_CREDENTIAL_TTL_MS = 15 * 60_000;

export type CloneGrant = { projectId: string; userId: string };

export function createCloneCredentials(sql: Sql) {
  return {
    async mint(grant: CloneGrant & { sandboxId?: string }): Promise<{ secret: string; expiresAt: Date }> {
      const secret = newSecret(CLONE_CREDENTIAL_PREFIX);
      const expiresAt = new Date(Date.now() + CLONE_CREDENTIAL_TTL_MS);
      await sql.query(
        `insert into clone_credentials (project_id, user_id, sandbox_id, credential_hash, expires_at) values ($1, $2, $3, $4, $5)`,
        [grant.projectId, grant.userId, grant.sandboxId ?? null, hashSecret(secret), expiresAt],
      );
      // Expired rows are useless: sweep them on the way.
      await sql.query("delete from clone_credentials where expires_at < now() - interval '1 hour'");
      return { secret, expiresAt };
    },

    async lookup(secret: string): Promise<CloneGrant | undefined> {
      const [row] = await sql.query<{ project_id: string; user_id: string }>(
        "select project_id, user_id from clone_credentials where credential_hash = $1 and expires_at > now()",
        [hashSecret(secret)],
      );
      return row && { projectId: row.project_id, userId: row.user_id };
    },
  };
}

export type CloneCredentials = ReturnType<typeof createCloneCredentials>;
