import type { SecretInfo } from "../../protocol/secret.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import type { Cipher } from "./cipher.ts";

// The project and name are bound into each ciphertext: a value copied to another row does not decrypt.
const aad = (projectId: string, name: string) => `${projectId}/${name}`;

export function createSecretStore(sql: Sql, cipher: Cipher | undefined) {
  const requireCipher = () => {
    if (!cipher)
      throw apiError("NOT_CONFIGURED", "secrets are unavailable: the server has no secrets key (SVC_SECRETS_KEY)");
    return cipher;
  };
  /** Bumped by every change to a project's secrets: what tells a sandbox made earlier that its values are stale. */
  async function revision(projectId: string): Promise<number> {
    const [project] = await sql.query<{ secrets_revision: number }>(
      "select secrets_revision from projects where id = $1",
      [projectId],
    );
    return project?.secrets_revision ?? 0;
  }

  return {
    revision,

    async list(projectId: string): Promise<{ secrets: SecretInfo[]; revision: number }> {
      const rows = await sql.query<{ name: string; updated_at: Date }>(
        "select name, updated_at from project_secrets where project_id = $1 order by name",
        [projectId],
      );
      return {
        secrets: rows.map((r) => ({ name: r.name, updated_at: iso(r.updated_at) })),
        revision: await revision(projectId),
      };
    },

    async set(projectId: string, values: Record<string, string>): Promise<number> {
      const c = requireCipher();
      return sql.transaction(async (tx) => {
        for (const [name, value] of Object.entries(values)) {
          await tx.query(
            `insert into project_secrets (project_id, name, value_enc) values ($1, $2, $3)
             on conflict (project_id, name) do update set value_enc = excluded.value_enc, updated_at = now()`,
            [projectId, name, c.encrypt(value, aad(projectId, name))],
          );
        }
        const [row] = await tx.query<{ r: number }>(
          "update projects set secrets_revision = secrets_revision + 1 where id = $1 returning secrets_revision as r",
          [projectId],
        );
        return row!.r;
      });
    },

    async unset(projectId: string, names: string[]): Promise<{ removed: string[]; revision: number }> {
      return sql.transaction(async (tx) => {
        const removed = await tx.query<{ name: string }>(
          "delete from project_secrets where project_id = $1 and name = any($2::text[]) returning name",
          [projectId, names],
        );
        const [row] = await tx.query<{ r: number }>(
          "update projects set secrets_revision = secrets_revision + 1 where id = $1 returning secrets_revision as r",
          [projectId],
        );
        return { removed: removed.map((r) => r.name).sort(), revision: row!.r };
      });
    },

    /** Decrypted values, for a sandbox's environment only. */
    async values(projectId: string): Promise<{ values: Record<string, string>; revision: number }> {
      const rows = await sql.query<{ name: string; value_enc: string }>(
        "select name, value_enc from project_secrets where project_id = $1 order by name",
        [projectId],
      );
      const at = await revision(projectId);
      const values: Record<string, string> = {};
      if (rows.length > 0) {
        const c = requireCipher();
        for (const r of rows) values[r.name] = c.decrypt(r.value_enc, aad(projectId, r.name));
      }
      return { values, revision: at };
    },
  };
}

export type SecretStore = ReturnType<typeof createSecretStore>;
