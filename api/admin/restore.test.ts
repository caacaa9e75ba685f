import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RestorePlan } from "../../protocol/admin.ts";
import { migrate } from "../db/migrate.ts";
import { openSql, type Sql } from "../db/sql.ts";
import { git } from "../git/run.ts";
import { adoptRestoredData, restoreDir } from "./restore.ts";

/** Rows as a backup of a running stack holds them: a running session with its sandbox, a live app, tokens. */
async function seed(sql: Sql) {
  const [account] = await sql.query<{ id: string }>("insert into accounts (name, slug) values ('a', 'a') returning id");
  const [user] = await sql.query<{ id: string }>(
    "insert into users (email, name, is_admin) values ('admin@selfhost.local', 'admin', true) returning id",
  );
  const [project] = await sql.query<{ id: string }>(
    `insert into projects (account_id, slug, name, repo_kind) values ($1, 'app', 'app', 'managed') returning id::text`,
    [account!.id],
  );
  const token = async (name: string) =>
    (
      await sql.query<{ id: string }>(
        "insert into tokens (user_id, name, token_hash, prefix, expires_at) values ($1, $2, $3, 'svc_pat_', now() + interval '1 day') returning id",
        [user!.id, name, randomUUID()],
      )
    )[0]!.id;
  const adminToken = await token("self-host admin");
  const userToken = await token("laptop");
  const sandboxToken = await token("session");
  const session = (status: string) =>
    sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, $4, $1, 'main', 'build', $5)`,
      [`${status}-session`, account!.id, project!.id, status, user!.id],
    );
  await session("running");
  await session("stopped");
  await sql.query(
    `insert into session_sandboxes (session_id, project_id, status, token_id, container_id)
     values ('running-session', $1, 'active', $2, 'container-of-the-original')`,
    [project!.id, sandboxToken],
  );
  await sql.query(
    `insert into app_deploys (id, project_id, app, revision, key, tip_key, spec, status, trigger, container_id)
     values ($1, $2, 'web', 'abc', 'k', 'k', '{}', 'live', 'merge', 'app-container-of-the-original')`,
    [randomUUID(), project!.id],
  );
  return { project: project!.id, adminToken, userToken, sandboxToken };
}

describe("the first start on restored data (svc self-host restore)", () => {
  let sql: Sql;
  let dataDir: string;
  let rows: Awaited<ReturnType<typeof seed>>;
  let source: string;
  const logs: string[] = [];
  const adopt = () => adoptRestoredData({ sql, dataDir, log: (msg) => logs.push(msg) });
  const plan = (overrides: Partial<RestorePlan> = {}): RestorePlan => ({
    format: 1,
    source_installation: source,
    installation: randomUUID(),
    repositories: [{ project_id: rows.project, slug: "app", head: "refs/heads/main", refs: 2 }],
    ...overrides,
  });
  const writePlan = (p: RestorePlan) => {
    mkdirSync(restoreDir(dataDir), { recursive: true });
    writeFileSync(join(restoreDir(dataDir), "restore.json"), JSON.stringify(p));
  };

  beforeAll(async () => {
    sql = await openSql({ pgliteDir: "memory://" });
    await migrate(sql);
    rows = await seed(sql);
    source = (await sql.query<{ id: string }>("select id::text as id from installation"))[0]!.id;
    dataDir = mkdtempSync(join(tmpdir(), "svc-restore-"));
    // The backed-up repository, as the backup bundled it: main and a hidden ref.
    const work = join(dataDir, "work");
    await git(["init", "--quiet", "-b", "main", work]);
    await git(["-c", "user.name=t", "-c", "user.email=t@e", "commit", "--quiet", "--allow-empty", "-m", "x"], {
      dir: work,
    });
    await git(["update-ref", "refs/svc/checkpoints/s1", "HEAD"], { dir: work });
    mkdirSync(join(restoreDir(dataDir), "repos"), { recursive: true });
    await git(["bundle", "create", "--quiet", join(restoreDir(dataDir), "repos", `${rows.project}.bundle`), "--all"], {
      dir: work,
    });
  });
  afterAll(async () => {
    await sql?.close();
  });

  it("does nothing without a plan", async () => {
    expect(await adopt()).toBe(false);
  });

  it("refuses to start on a plan for another installation's data, keeping the plan", async () => {
    writePlan(plan({ source_installation: randomUUID() }));
    await expect(adopt()).rejects.toThrow(/restore the backup again/);
    expect(existsSync(join(restoreDir(dataDir), "restore.json"))).toBe(true);
  });

  it("becomes a new installation, takes the repositories in and lets go of the original's sandboxes", async () => {
    const p = plan();
    writePlan(p);
    expect(await adopt()).toBe(true);
    expect(existsSync(restoreDir(dataDir))).toBe(false);
    expect((await sql.query<{ id: string }>("select id::text as id from installation"))[0]!.id).toBe(p.installation);

    const repo = join(dataDir, "repos", `${rows.project}.git`);
    const refs = (await git(["for-each-ref", "--format=%(refname)"], { dir: repo })).stdout.trim().split("\n");
    expect(refs.sort()).toEqual(["refs/heads/main", "refs/svc/checkpoints/s1"]);
    expect((await git(["symbolic-ref", "HEAD"], { dir: repo })).stdout.trim()).toBe("refs/heads/main");
    expect((await git(["rev-parse", "--is-bare-repository"], { dir: repo })).stdout.trim()).toBe("true");

    const revoked = await sql.query<{ id: string; revoked: boolean }>(
      "select id, revoked_at is not null as revoked from tokens",
    );
    const isRevoked = (id: string) => revoked.find((t) => t.id === id)?.revoked;
    expect(isRevoked(rows.adminToken)).toBe(true);
    expect(isRevoked(rows.sandboxToken)).toBe(true);
    expect(isRevoked(rows.userToken)).toBe(false);

    const sandboxes = await sql.query<{ status: string; container_id: string | null }>(
      "select status, container_id from session_sandboxes",
    );
    expect(sandboxes).toEqual([{ status: "stopped", container_id: null }]);
    const sessions = await sql.query<{ session_id: string; status: string; error: string | null }>(
      "select session_id, status, error from project_sessions order by session_id",
    );
    expect(sessions).toEqual([
      { session_id: "running-session", status: "stopped", error: expect.stringContaining("restored from a backup") },
      { session_id: "stopped-session", status: "stopped", error: null },
    ]);
    const apps = await sql.query<{ status: string; container_id: string | null }>(
      "select status, container_id from app_deploys",
    );
    expect(apps).toEqual([{ status: "live", container_id: null }]);
  });

  it("is done once: a second API replica finding the same plan only tidies up", async () => {
    const [before] = await sql.query<{ id: string }>("select id::text as id from installation");
    writePlan(plan({ installation: before!.id }));
    expect(await adopt()).toBe(false);
    expect(existsSync(restoreDir(dataDir))).toBe(false);
    expect((await sql.query<{ id: string }>("select id::text as id from installation"))[0]!.id).toBe(before!.id);
  });
});
