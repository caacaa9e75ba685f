import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { loadMigrations, migrate } from "../../api/db/migrate.ts";
import { ensureInstallation, makePgliteTemplate } from "../../api/db/pglite-template.ts";
import { openSql, type Sql } from "../../api/db/sql.ts";

export type DatabaseKind = "pglite" | "postgres";
export const DATABASE_KINDS: DatabaseKind[] = ["pglite", "postgres"];

/**
 * The kinds a test file's API runs on: its own one, the api tier's files split between the two so that a run drives
 * the whole API on each (test/storage.test.ts and api/db/sql.test.ts hold the dialect itself to both); every file on
 * both with SVC_TEST_DATABASES=both, as a change to the SQL layer deserves. Running each file on both cost the
 * tier a third of its time.
 */
export function databaseKinds(own: DatabaseKind): DatabaseKind[] {
  const both = process.env.SVC_TEST_DATABASES;
  if (both !== undefined && both !== "" && both !== "both")
    throw new Error(`SVC_TEST_DATABASES is 'both' or unset (each file on its own kind), not '${both}'`);
  return both === "both" ? DATABASE_KINDS : [own];
}

const ADMIN_URL = process.env.SVC_TEST_DATABASE_URL ?? "postgres://svc:svc@127.0.0.1:5432/svc";

export type TestDatabase = { sql: Sql; url?: string; drop(): Promise<void> };

/**
 * A fresh, empty database of the given kind: PGlite in memory, or a new database on the real server.
 * The server is required: with CI=true or not, a missing PostgreSQL fails the test (scripts/setup.sh starts one).
 */
export async function freshDatabase(kind: DatabaseKind, options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const migrated = options.migrated !== false;
  if (kind === "pglite") {
    const sql = await openSql({ pgliteDir: "memory://", pgliteData: migrated ? await migratedPglite() : undefined });
    if (migrated) await ensureInstallation(sql);
    return { sql, drop: () => sql.close() };
  }
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
  if (migrated) await migrate(sql);
  return {
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

/**
 * A migrated PGlite's data directory, made once per version of the migrations and of PGlite and kept on disk for
 * every test process (Vitest forks one per file): a copy opens in 0.35 s where initdb and the migrations take 1.3 s,
 * which the api and docker tiers pay some fifty times.
 */
async function migratedPglite(): Promise<Blob> {
  const migrations = loadMigrations();
  const pgliteVersion = readFileSync(new URL("../../node_modules/@electric-sql/pglite/package.json", import.meta.url));
  // The template's form is part of the key: since copies make their installation row, the templates hold none.
  const key = createHash("sha256")
    .update(pgliteVersion)
    .update(JSON.stringify(migrations))
    .update("no installation row")
    .digest("hex")
    .slice(0, 16);
  const dir = join(tmpdir(), "svc-test-pglite");
  const file = join(dir, `${key}.tar`);
  try {
    return new Blob([readFileSync(file)]);
  } catch {
    const data = await makePgliteTemplate("none", migrations);
    // Written aside and renamed: a process reading at the same time sees the whole file or none.
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}`;
    writeFileSync(partial, data);
    renameSync(partial, file);
    return new Blob([data]);
  }
}
