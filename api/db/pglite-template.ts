import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGLITE_TEMPLATE_FILE } from "../../protocol/package-root.ts";
import { type Migration, migrate } from "./migrate.ts";
import { openSql, type Sql } from "./sql.ts";

// scripts/build.mjs names the file it writes by this module's export: the bundle it runs is this module.
export { PGLITE_TEMPLATE_FILE };

/**
 * A new embedded database starts as a copy of a migrated, empty one that the build made (scripts/build.mjs writes it
 * beside the bundle): PGlite's initdb costs some 3 CPU-seconds and 2 s on these machines, a copy 0.8 and 0.6. Where
 * there is none (the API run from source), initdb runs as before.
 */
const SHIPPED = fileURLToPath(new URL(`./${PGLITE_TEMPLATE_FILE}`, import.meta.url));

/**
 * A migrated, empty database's data directory (PGlite's dumpDataDir), without the installation's row: each copy makes
 * its own id (ensureInstallation), as a new database does. Stacks sharing an engine tell their sandboxes apart by it.
 */
export async function makePgliteTemplate(
  compression: "gzip" | "none",
  migrations?: Migration[],
): Promise<Uint8Array<ArrayBuffer>> {
  const sql = await openSql({ pgliteDir: "memory://" });
  await migrate(sql, migrations);
  await sql.query("delete from installation");
  const data = new Uint8Array(await (await sql.dumpDataDir!(compression)).arrayBuffer());
  await sql.close();
  return data;
}

/** The shipped template when `dir` holds no database yet (PostgreSQL's PG_VERSION is the first file initdb writes). */
export function shippedTemplateFor(dir: string, file = SHIPPED): Blob | undefined {
  if (existsSync(join(dir, "PG_VERSION")) || !existsSync(file)) return undefined;
  return new Blob([readFileSync(file)]);
}

/**
 * The installation's one row, made where a copy of the template has none yet. On every start, not only the first: a
 * crash between the copy and this statement leaves a database without one, which the next start completes.
 */
export async function ensureInstallation(sql: Sql): Promise<void> {
  await sql.query("insert into installation default values on conflict do nothing");
}
