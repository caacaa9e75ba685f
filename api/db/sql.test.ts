import { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
