import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockDataDir } from "./pglite-lock.ts";
import { openSql, type Sql } from "./sql.ts";

// The port prepares PGlite statements itself; PGlite's own query() is the reference for what callers get back.
describe("the Sql port on PGlite", () => {
  let sql: Sql;
  let reference: PGlite;
  const SCHEMA = `create table t (id uuid primary key default gen_random_uuid(), n int unique, name text,
    doc jsonb, tags text[], at timestamptz default now(), ok boolean, big bigint)`;

  beforeAll(async () => {
    sql = await openSql({ pgliteDir: "memory://" });
    reference = await PGlite.create("memory://");
    await sql.exec(SCHEMA);
    await reference.exec(SCHEMA);
  });
  afterAll(async () => {
    await sql.close();
    await reference.close();
  });

  it("binds parameters and parses rows exactly as PGlite's query() does, on every call", async () => {
    const at = new Date("2024-05-06T07:08:09.010Z");
    const insert = `insert into t (id, n, name, doc, tags, at, ok, big)
      values ($1, $2, $3, $4, $5, $6, $7, $8) returning *`;
    const params = [
      "6f9f1f5e-4a57-4f3c-9d38-0d5c8a3b1e2f",
      7,
      "it's é✓😀",
      { a: [1, "x"] },
      ["a", "b,c"],
      at,
      true,
      2n,
    ];
    const ours = await sql.query(insert, params);
    const theirs = (await reference.query(insert, params)).rows;
    expect(ours).toEqual(theirs);
    for (let i = 0; i < 3; i++) {
      expect(await sql.query("select * from t where n = $1 and name = $2", [7, "it's é✓😀"])).toEqual(theirs);
    }
    expect(await sql.query("select name from t where n = $1", [null])).toEqual([]);
    // Larger than one write of the engine: rows arrive in several pieces.
    const many = "select g, null as nothing, repeat('é✓', $1) as s from generate_series(1, 200) g";
    expect(await sql.query(many, [5000])).toEqual((await reference.query(many, [5000])).rows);
    expect(await sql.query("update t set name = $2 where n = $1", [7, "x"])).toEqual([]);
  });

  it("reports database errors with their codes and keeps working after them, in and out of transactions", async () => {
    const insert = "insert into t (n) values ($1)";
    await sql.query(insert, [1]);
    await expect(sql.query(insert, [1])).rejects.toMatchObject({ code: "23505" });
    await expect(sql.query("select * from t where id = $1", ["not-a-uuid"])).rejects.toMatchObject({ code: "22P02" });
    await expect(sql.query("select nope from t")).rejects.toMatchObject({ code: "42703" });
    await expect(
      sql.transaction(async (tx) => {
        await tx.query(insert, [2]);
        await tx.query(insert, [1]);
      }),
    ).rejects.toMatchObject({ code: "23505" });
    expect(await sql.query("select n from t where n = any($1) order by n", [[1, 2]])).toEqual([{ n: 1 }]);
    await sql.transaction((tx) => tx.query(insert, [3]));
    expect(await sql.query("select count(*)::int as c from t where n = $1", [3])).toEqual([{ c: 1 }]);
  });

  it("sees a table's new columns after a migration changed it", async () => {
    const all = "select * from t where n = $1";
    await sql.query("insert into t (n) values ($1)", [40]);
    expect(Object.keys((await sql.query(all, [40]))[0]!)).not.toContain("extra");
    await sql.transaction((tx) => tx.exec("alter table t add column extra text default 'e'"));
    expect((await sql.query<{ extra: string }>(all, [40]))[0]!.extra).toBe("e");
  });

  it("serves any number of distinct statements", async () => {
    const rows = await Promise.all(
      Array.from({ length: 600 }, (_, i) => sql.query<{ v: number }>(`select $1::int + ${i} as v`, [1])),
    );
    expect(rows.map((r) => r[0]!.v)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
  });
});

// One process at a time on an embedded data directory: two each write it as if alone, and one's rows are lost.
describe("an embedded data directory is opened by one process at a time", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-pglite-lock-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses a second opener, naming the holder, and leaves the first working", async () => {
    const first = await openSql({ pgliteDir: join(dir, "one") });
    await first.exec("create table kept (n int)");
    await expect(openSql({ pgliteDir: join(dir, "one", ".") })).rejects.toThrow(
      `the embedded database in ${join(dir, "one", ".")} is in use by another process (pid ${process.pid})`,
    );
    await first.query("insert into kept values (1)");
    await first.close();
    const again = await openSql({ pgliteDir: join(dir, "one") });
    expect(await again.query("select n from kept")).toEqual([{ n: 1 }]);
    await again.close();
  });

  it("is free again once its holder dies, a SIGKILL included", async () => {
    const held = join(dir, "two");
    mkdirSync(held);
    const holder = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        `import("./api/db/pglite-lock.ts").then((m) => m.lockDataDir(${JSON.stringify(held)}))` +
          `.then(() => { console.log("held"); setInterval(() => {}, 1000); })`,
      ],
      { cwd: fileURLToPath(new URL("../..", import.meta.url)), stdio: ["ignore", "pipe", "inherit"] },
    );
    await new Promise((resolve) => holder.stdout!.once("data", resolve));
    await expect(lockDataDir(held)).rejects.toThrow(`in use by another process (pid ${holder.pid})`);
    const exited = new Promise((resolve) => holder.once("exit", resolve));
    holder.kill("SIGKILL");
    await exited;
    const lock = await lockDataDir(held);
    await lock.release();
  });

  it("says which directory is damaged when PGlite cannot open it, and lets go of it", async () => {
    const damaged = join(dir, "three");
    const sql = await openSql({ pgliteDir: damaged });
    await sql.exec("create table t (n int)");
    await sql.close();
    // The checkpoint pg_control names is in the write-ahead log; without it PostgreSQL cannot start.
    const wal = join(damaged, "pg_wal");
    for (const name of readdirSync(wal).filter((f) => /^[0-9A-F]{24}$/.test(f))) {
      writeFileSync(join(wal, name), Buffer.alloc(16 * 1024 * 1024));
    }
    await expect(openSql({ pgliteDir: damaged })).rejects.toThrow(
      `the embedded database in ${damaged} did not open (PGlite: Aborted()): its files are damaged`,
    );
    const lock = await lockDataDir(damaged);
    await lock.release();
  });
});
