import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Sql } from "./sql.ts";

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations/", import.meta.url));
// Any fixed key: every process migrating the same database takes the same lock.
const MIGRATION_LOCK_KEY = 0x5fc_0001;

export type Migration = { version: number; name: string; sql: string };

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), name: f, sql: readFileSync(dir + f, "utf8") }));
}

/** Applies pending migrations in one transaction under an advisory lock, so concurrent starts are safe. */
export async function migrate(sql: Sql, migrations = loadMigrations()): Promise<number[]> {
  return sql.transaction(async (tx) => {
    await tx.query("select pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
    await tx.exec(
      "create table if not exists schema_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())",
    );
    const done = new Set(
      (await tx.query<{ version: number }>("select version from schema_migrations")).map((r) => r.version),
    );
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await tx.exec(m.sql);
      await tx.query("insert into schema_migrations (version, name) values ($1, $2)", [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}
