import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { migrate } from "../../api/db/migrate.ts";
import { openSql, type Sql } from "../../api/db/sql.ts";

export type DatabaseKind = "pglite" | "postgres";
export const DATABASE_KINDS: DatabaseKind[] = ["pglite", "postgres"];

const ADMIN_URL = process.env.SVC_TEST_DATABASE_URL ?? "postgres://svc:svc@127.0.0.1:5432/svc";

export type TestDatabase = { sql: Sql; url?: string; drop(): Promise<void> };

/**
 * A fresh, empty database of the given kind: PGlite in memory, or a new database on the real server.
 * The server is required: with CI=true or not, a missing PostgreSQL fails the test (scripts/setup.sh starts one).
 */
export async function freshDatabase(kind: DatabaseKind, options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  let db: TestDatabase;
  if (kind === "pglite") {
    const sql = await openSql({ pgliteDir: "memory://" });
    db = { sql, drop: () => sql.close() };
  } else {
    const name = `svc_test_${randomBytes(6).toString("hex")}`;
    const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`create database ${name}`);
    } catch (err) {
      await admin.end();
      throw new Error(`PostgreSQL at ${ADMIN_URL} is required (run scripts/setup.sh): ${(err as Error).message}`);
    }
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    const sql = await openSql({ databaseUrl: url.toString() });
    db = {
      sql,
      url: url.toString(),
      async drop() {
        await sql.close();
        // Cleanup only: a database an autovacuum worker still holds is left for the next setup to ignore.
        await admin.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
        await admin.end();
      },
    };
  }
  if (options.migrated !== false) await migrate(db.sql);
  return db;
}
