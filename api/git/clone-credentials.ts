import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { CLONE_CREDENTIAL_PREFIX } from "../../protocol/token.ts";
import type { Sql } from "../db/sql.ts";

/** Minutes-long: the daemon's credential helper fetches a new one whenever git asks. */
export const CLONE_CREDENTIAL_TTL_MS = 15 * 60_000;

/** `sandboxId`: the sandbox it was minted for, whose session branch is then the only one it may push. */
export type CloneGrant = { projectId: string; userId: string; sandboxId?: string };

export function createCloneCredentials(sql: Sql) {
  return {
    /** One minted for a sandbox lives no longer than that sandbox. */
    async mint(grant: CloneGrant): Promise<{ secret: string; expiresAt: Date }> {
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

    /**
     * The grant of an unexpired credential. One minted for a sandbox (by its service key or its session token)
     * works only while that sandbox is provisioning or active: stopping it ends its credentials at once.
     */
    async lookup(secret: string): Promise<CloneGrant | undefined> {
      const [row] = await sql.query<{ project_id: string; user_id: string; sandbox_id: string | null }>(
        `select c.project_id, c.user_id, c.sandbox_id from clone_credentials c
         where c.credential_hash = $1 and c.expires_at > now()
           and (c.sandbox_id is null or exists (select 1 from session_sandboxes b
                where b.sandbox_id = c.sandbox_id and b.status in ('provisioning', 'active')))`,
        [hashSecret(secret)],
      );
      return row && { projectId: row.project_id, userId: row.user_id, sandboxId: row.sandbox_id ?? undefined };
    },
  };
}

export type CloneCredentials = ReturnType<typeof createCloneCredentials>;
