import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { createChangeRequestStore } from "../api/change-requests/store.ts";
import { loadMigrations, migrate } from "../api/db/migrate.ts";
import { DATABASE_KINDS, freshDatabase, type TestDatabase } from "./support/databases.ts";

describe.each(DATABASE_KINDS)("storage on %s", (kind) => {
  let db: TestDatabase | undefined;
  afterEach(async () => {
    await db?.drop();
    db = undefined;
  });

  async function seedProject(sql: TestDatabase["sql"]) {
    const [user] = await sql.query<{ id: string }>("insert into users (email, name) values ($1, 'u') returning id", [
      `${randomUUID()}@example.test`,
    ]);
    const [account] = await sql.query<{ id: string }>(
      "insert into accounts (name, slug) values ('a', $1) returning id",
      [randomUUID()],
    );
    const [project] = await sql.query<{ id: string }>(
      "insert into projects (account_id, slug, name, repo_kind) values ($1, 'p', 'p', 'managed') returning id",
      [account!.id],
    );
    return { userId: user!.id, accountId: account!.id, projectId: project!.id };
  }

  async function insertSession(sql: TestDatabase["sql"], ids: Awaited<ReturnType<typeof seedProject>>) {
    const sessionId = randomUUID();
    await sql.query(
      `insert into project_sessions (session_id, account_id, project_id, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, $1, 'main', 'build', $4)`,
      [sessionId, ids.accountId, ids.projectId, ids.userId],
    );
    return sessionId;
  }

  async function insertCr(
    sql: TestDatabase["sql"],
    ids: Awaited<ReturnType<typeof seedProject>>,
    number: number,
    extra = {},
  ) {
    const row = { head_ref: "feature", base_ref: "main", origin_session_id: null, ...extra };
    const [cr] = await sql.query<{ cr_id: string }>(
      `insert into change_requests (account_id, project_id, number, title, base_ref, head_ref, created_by, origin_session_id)
       values ($1, $2, $3, 't', $4, $5, $6, $7) returning cr_id`,
      [ids.accountId, ids.projectId, number, row.base_ref, row.head_ref, ids.userId, row.origin_session_id],
    );
    return cr!.cr_id;
  }

  it("applies migrations once, idempotently, even when two runs race", async () => {
    db = await freshDatabase(kind, { migrated: false });
    const results = await Promise.all([migrate(db.sql), migrate(db.sql)]);
    const all = loadMigrations().map((m) => m.version);
    expect(results.flat().sort((a, b) => a - b)).toEqual(all);
    expect(await migrate(db.sql)).toEqual([]);
    const tables = await db.sql.query<{ table_name: string }>(
      "select table_name from information_schema.tables where table_schema = 'public' order by 1",
    );
    expect(tables.map((t) => t.table_name)).toEqual(
      expect.arrayContaining([
        "accounts",
        "users",
        "memberships",
        "projects",
        "tokens",
        "project_sessions",
        "session_sandboxes",
        "change_requests",
      ]),
    );
  });

  it("keeps CR numbers unique per project and CRs' defaults as SPEC says", async () => {
    db = await freshDatabase(kind);
    const ids = await seedProject(db.sql);
    const crId = await insertCr(db.sql, ids, 1);
    const [cr] = await db.sql.query<Record<string, unknown>>("select * from change_requests where cr_id = $1", [crId]);
    expect(cr).toMatchObject({ status: "open", description: "", metadata: {}, head_commit_sha: null });
    expect(cr!.created_at).toBeInstanceOf(Date);
    await expect(insertCr(db.sql, ids, 1)).rejects.toMatchObject({ code: "23505" });
    await expect(insertCr(db.sql, ids, 2, { head_ref: "main" })).rejects.toMatchObject({ code: "23514" });
  });

  it("nulls origin_session_id when the session goes, and deletes CRs with their project", async () => {
    db = await freshDatabase(kind);
    const ids = await seedProject(db.sql);
    const sessionId = await insertSession(db.sql, ids);
    await db.sql.query("insert into session_sandboxes (session_id, project_id) values ($1, $2)", [
      sessionId,
      ids.projectId,
    ]);
    const crId = await insertCr(db.sql, ids, 1, { origin_session_id: sessionId });

    await db.sql.query("delete from project_sessions where session_id = $1", [sessionId]);
    const [cr] = await db.sql.query<{ origin_session_id: string | null }>(
      "select origin_session_id from change_requests where cr_id = $1",
      [crId],
    );
    expect(cr!.origin_session_id).toBeNull();
    expect(await db.sql.query("select 1 from session_sandboxes where session_id = $1", [sessionId])).toHaveLength(0);

    await db.sql.query("delete from projects where id = $1", [ids.projectId]);
    expect(await db.sql.query("select 1 from change_requests where cr_id = $1", [crId])).toHaveLength(0);
  });

  it("reads a CR through the store as its row is now, whoever changed it", async () => {
    db = await freshDatabase(kind);
    const ids = await seedProject(db.sql);
    const sessionId = await insertSession(db.sql, ids);
    const crId = await insertCr(db.sql, ids, 1, { origin_session_id: sessionId });
    const store = createChangeRequestStore(db.sql);
    const replica = createChangeRequestStore(db.sql);
    const read = async () => [await store.byId(ids.projectId, crId), await store.byNumber(ids.projectId, 1)];
    for (const cr of await read()) expect(cr).toMatchObject({ title: "t", origin_session_id: sessionId });
    expect((await read())[0]).toEqual((await read())[1]);

    await db.sql.query("update change_requests set title = 'retitled' where cr_id = $1", [crId]);
    for (const cr of await read()) expect(cr!.title).toBe("retitled");
    await db.sql.query("delete from project_sessions where session_id = $1", [sessionId]);
    for (const cr of await read()) expect(cr!.origin_session_id).toBeNull();
    await replica.close(crId, ids.userId);
    for (const cr of await read()) expect(cr!.status).toBe("closed");
    await db.sql.query("delete from change_requests where cr_id = $1", [crId]);
    expect(await read()).toEqual([undefined, undefined]);
  });

  it("rolls back a failed transaction completely", async () => {
    db = await freshDatabase(kind);
    const sql = db.sql;
    await expect(
      sql.transaction(async (tx) => {
        await tx.query("insert into accounts (name, slug) values ('x', 'rollback-me')");
        await tx.query("select 1/0");
      }),
    ).rejects.toThrow();
    expect(await sql.query("select 1 from accounts where slug = 'rollback-me'")).toHaveLength(0);
  });

  it("rejects statuses outside SPEC's enums", async () => {
    db = await freshDatabase(kind);
    const ids = await seedProject(db.sql);
    const crId = await insertCr(db.sql, ids, 1);
    await expect(
      db.sql.query("update change_requests set status = 'draft' where cr_id = $1", [crId]),
    ).rejects.toMatchObject({
      code: "23514",
    });
  });
});
