import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { PGlite } from "@electric-sql/pglite";
import postgres from "postgres";
import { type DataDirLock, lockDataDir } from "./pglite-lock.ts";
import { createPgliteStatements } from "./pglite-statements.ts";

/**
 * The one storage interface: plain SQL with `$n` parameters, PostgreSQL dialect everywhere.
 * Embedded PGlite when no DATABASE_URL is given, a real server through postgres.js otherwise.
 */
export type Sql = {
  readonly kind: "pglite" | "postgres";
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Runs several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
  /** Runs `fn` in one transaction; nested calls join the outer one. */
  transaction<R>(fn: (tx: Sql) => Promise<R>): Promise<R>;
  /** One connection of its own until released: session-level state (advisory locks) lives on it. */
  reserve(): Promise<ReservedSql>;
  /**
   * PGlite only: its whole data directory as a tar.gz (PGlite's dumpDataDir), taken while no query and no
   * transaction runs, so a consistent copy (`svc self-host backup`). PostgreSQL has pg_dump for that. `none`: a
   * plain tar, ten times larger and opened in half the time (the tests' migrated template).
   */
  dumpDataDir?: (compression?: "gzip" | "none") => Promise<Blob>;
  close(): Promise<void>;
};

export type ReservedSql = Pick<Sql, "kind" | "query"> & { release(): Promise<void> };

export type SqlOptions = {
  databaseUrl?: string;
  pgliteDir?: string;
  /** PGlite only: a data directory to start from (a `dumpDataDir` of another), in place of a new, empty one. */
  pgliteData?: Blob;
};

export async function openSql(options: SqlOptions): Promise<Sql> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl);
  if (!options.pgliteDir) throw new Error("openSql: give databaseUrl or pgliteDir");
  return openPglite(options.pgliteDir, options.pgliteData);
}

type PgliteTx = Pick<PGlite, "query" | "exec">;

/**
 * Takes group and world access off everything under `dir`. PGlite writes its initial data files at 0666 with an
 * explicit chmod, which no umask stops; files it creates later honour the umask (077 in api/main.ts).
 */
function ownerOnly(dir: string): void {
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) return;
  if (st.mode & 0o077) chmodSync(dir, st.mode & 0o700);
  if (st.isDirectory()) for (const name of readdirSync(dir)) ownerOnly(join(dir, name));
}

/**
 * PGlite's PostgreSQL is one large WebAssembly module. V8 compiles it with its baseline compiler (Liftoff), then
 * compiles the functions it finds hot again with TurboFan on helper threads, which for this module costs more CPU than
 * it wins back: a new embedded API took 6.1-6.6 CPU-s to answer its health check and 4.9-5.5 with Liftoff only, and
 * 6,000 queries (inserts, indexed selects, aggregates) took 10.4-13.1 CPU-s against 7.7-9.4, no slower (2 cores). The flag is
 * the process's; the only other WebAssembly here is undici's HTTP parser, which measured the same either way.
 */
function compileWasmWithLiftoffOnly(): void {
  setFlagsFromString("--liftoff-only");
}

/**
 * PGlite aborts (a bare "Aborted()") where PostgreSQL would stop with a PANIC: a data directory whose write-ahead log
 * does not hold the checkpoint its control file names, say. Which directory, and the ways out, are what the user needs.
 */
async function createPglite(dir: string, loadDataDir?: Blob): Promise<PGlite> {
  const existing = !dir.startsWith("memory://") && existsSync(join(dir, "PG_VERSION"));
  try {
    return await PGlite.create(dir, loadDataDir && { loadDataDir });
  } catch (err) {
    if (!existing) throw err;
    throw new Error(
      `the embedded database in ${dir} did not open (PGlite: ${(err as Error).message.split(".")[0]}): its files are ` +
        "damaged. Restore a backup (svc self-host restore FILE), or move the directory aside to start an empty one",
      { cause: err },
    );
  }
}

async function openPglite(dir: string, loadDataDir?: Blob): Promise<Sql> {
  compileWasmWithLiftoffOnly();
  let lock: DataDirLock | undefined;
  if (!dir.startsWith("memory://")) {
    // The database files are the user's data: only the owner may enter the directory, an older one included.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    lock = await lockDataDir(dir);
  }
  let db: PGlite;
  try {
    db = await createPglite(dir, loadDataDir);
  } catch (err) {
    await lock?.release();
    throw err;
  }
  if (!dir.startsWith("memory://")) ownerOnly(dir);
  const statements = createPgliteStatements(db);
  const wrap = (conn: PgliteTx, inTx: boolean): Sql => ({
    kind: "pglite",
    async query<T>(text: string, params: unknown[] = []) {
      return (await statements.query<T>(text, params, inTx)) ?? (await conn.query<T>(text, params)).rows;
    },
    async exec(text: string) {
      await conn.exec(text);
      await statements.forget(conn);
    },
    transaction: (fn) => (inTx ? fn(wrap(conn, true)) : db.transaction((tx) => fn(wrap(tx, true)))),
    // PGlite has one connection, which is already this process's own.
    reserve: async () => ({ kind: "pglite", query: wrap(db, false).query, release: async () => {} }),
    // Under the transaction lock: no transaction of another caller is half done in the copy.
    dumpDataDir: inTx ? undefined : (compression = "gzip") => db.transaction(() => db.dumpDataDir(compression)),
    async close() {
      if (inTx) return;
      await db.close();
      await lock?.release();
    },
  });
  return wrap(db, false);
}

function openPostgres(url: string): Sql {
  const client = postgres(url, {
    max: 10,
    onnotice: () => {},
  });
  type Conn = postgres.Sql | postgres.TransactionSql;
  const wrap = (conn: Conn, inTx: boolean): Sql => ({
    kind: "postgres",
    async query<T>(text: string, params: unknown[] = []) {
      // Prepared on each connection once, as PGlite's statements are: the texts are the code's own, not dynamic.
      return (await conn.unsafe(text, params as postgres.ParameterOrJSON<never>[], {
        prepare: true,
      })) as unknown as T[];
    },
    async exec(text: string) {
      await conn.unsafe(text);
    },
    transaction: (fn) =>
      inTx
        ? fn(wrap(conn, true))
        : (client.begin((tx) => fn(wrap(tx, true))) as Promise<Awaited<ReturnType<typeof fn>>>),
    async reserve() {
      const reserved = await client.reserve();
      return {
        kind: "postgres",
        query: wrap(reserved, true).query,
        release: async () => reserved.release(),
      };
    },
    async close() {
      if (!inTx) await client.end({ timeout: 5 });
    },
  });
  return wrap(client, false);
}
