import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMigrations, migrate } from "../api/db/migrate.ts";
import { createTriggerStore } from "../api/triggers/store.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { cliHome, svc } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { noSandboxes, settings } from "./support/no-sandboxes.ts";

const MANIFEST = `[[triggers]]
slug = "nightly"
schedule = "0 3 * * *"
prompt = "Upgrade the dependencies"

[[triggers]]
slug = "weekly"
schedule = "0 4 * * 1"
prompt = "Tidy the README"
`;
const CAP_MESSAGE = "may run 1 sessions at once";

describe.each(databaseKinds("pglite"))("a trigger's last_fired_at moves only when a session started (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;

  const trigger = async (slug: string) =>
    (await call(api.url, "GET", `/v1/projects/${projectId}/triggers/${slug}`, { token: user.token })).body;
  const cli = (args: string[]) =>
    svc([...args, "--project", projectId], {
      env: { ...cliHome().env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: user.token },
    });
  async function info(slug: string) {
    const out = await cli(["triggers", "info", slug, "--json"]);
    expect(out.code, out.stderr).toBe(0);
    return JSON.parse(out.stdout);
  }
  const firings = (slug: string) =>
    db.sql.query<{ manual: boolean; session_id: string | null; error: string | null }>(
      "select manual, session_id, error from trigger_firings where project_id = $1 and slug = $2 order by created_at",
      [projectId, slug],
    );
  /** A running session of the account, as the orchestrator leaves one: it takes the one slot the cap allows. */
  async function takeTheSlot(): Promise<void> {
    const sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, 'running', $1, 'main', 'build', $4)`,
      [sessionId, user.accountId, projectId, user.userId],
    );
  }
  const freeTheSlot = () =>
    db.sql.query("update project_sessions set status = 'stopped' where account_id = $1", [user.accountId]);

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql, {
      orchestrator: {
        driver: noSandboxes,
        settings: { ...settings, sessionCap: 1 },
        root: process.cwd(),
        baseImage: "none",
      },
    });
    user = await seedUser(api.services);
    const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Refusals" } });
    projectId = created.body.id;
    const work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("manifest", { "svc.toml": MANIFEST });
    await work.pushed("main");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("a firing the session cap refuses is recorded with its reason and time, never as fired", async () => {
    await takeTheSlot();
    const before = Date.now();
    const fired = await cli(["triggers", "fire", "weekly"]);
    expect(fired.code).toBe(1);
    expect(fired.stderr).toContain(CAP_MESSAGE);

    const json = await info("weekly");
    expect(json).toMatchObject({ slug: "weekly", last_fired_at: null, last_session_id: null });
    expect(json.last_refusal).toContain(CAP_MESSAGE);
    expect(json.last_error).toBe(json.last_refusal);
    const refusedAt = new Date(json.last_refused_at).getTime();
    expect(refusedAt).toBeGreaterThanOrEqual(before - 1000);
    expect(refusedAt).toBeLessThanOrEqual(Date.now() + 1000);
    // The API's trigger JSON is what the CLI prints.
    expect(await trigger("weekly")).toEqual(json);
    const [firing] = await firings("weekly");
    expect(firing).toMatchObject({ manual: true, session_id: null });
    expect(firing!.error).toContain(CAP_MESSAGE);

    const text = await cli(["triggers", "info", "weekly"]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("fired:    never");
    expect(text.stdout).toContain(`refused:  ${json.last_refused_at}: session cap reached: account `);
    expect(text.stdout).toContain(CAP_MESSAGE);
  });

  it("a session moves last_fired_at and clears last_error; a later refusal moves only the refusal; the last refusal stays", async () => {
    await freeTheSlot();
    const fired = await cli(["triggers", "fire", "nightly"]);
    expect(fired.code, fired.stderr).toBe(0);
    const sessionId = fired.stdout.trim();
    const first = await info("nightly");
    expect(first).toMatchObject({
      last_session_id: sessionId,
      last_error: null,
      last_refused_at: null,
      last_refusal: null,
    });
    expect(first.last_fired_at).not.toBeNull();

    // The scheduler's way: an instant claimed, then refused at the cap.
    await takeTheSlot();
    const port = api.services.triggerPort;
    const at = new Date(Date.now() - 60_000);
    expect(await port.claim(projectId, "nightly", at)).toBe(true);
    const spec = (await port.project(projectId))?.triggers?.find((t) => t.slug === "nightly");
    const out = await port.fire(projectId, spec!, at);
    expect("error" in out && out.error).toContain(CAP_MESSAGE);
    const refused = await info("nightly");
    expect(refused).toMatchObject({ last_fired_at: first.last_fired_at, last_session_id: sessionId });
    expect(refused.last_error).toContain(CAP_MESSAGE);
    expect(refused.last_refusal).toContain(CAP_MESSAGE);
    expect(new Date(refused.last_refused_at).getTime()).toBeGreaterThan(new Date(first.last_fired_at).getTime());
    const text = (await cli(["triggers", "info", "nightly"])).stdout;
    expect(text).toContain(`fired:    ${first.last_fired_at} (session ${sessionId})`);
    expect(text).toContain(`refused:  ${refused.last_refused_at}: `);

    await freeTheSlot();
    const again = await call(api.url, "POST", `/v1/projects/${projectId}/triggers/nightly/fire`, { token: user.token });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    const latest = await info("nightly");
    expect(latest).toMatchObject({
      last_session_id: again.body.session_id,
      last_error: null,
      last_refused_at: refused.last_refused_at,
      last_refusal: refused.last_refusal,
    });
    expect(new Date(latest.last_fired_at).getTime()).toBeGreaterThan(new Date(refused.last_refused_at).getTime());
    expect((await firings("nightly")).map((f) => [f.manual, f.session_id !== null, f.error !== null])).toEqual([
      [true, true, false],
      [false, false, true],
      [true, true, false],
    ]);
  });
});

describe.each(databaseKinds("pglite"))("migration 0020 on trigger state written before it (%s)", (kind) => {
  let db: TestDatabase;

  afterAll(async () => {
    await db?.drop();
  });

  it("takes each trigger's last refusal from its firings and gives last_fired_at back to the last session", async () => {
    db = await freshDatabase(kind);
    const api = await startApi(db.sql);
    const user = await seedUser(api.services);
    const projectId = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Old" } })).body
      .id as string;
    await api.close();
    // The database as migration 0019 left it.
    await db.sql.query("alter table trigger_state drop column last_refused_at, drop column last_refusal");
    await db.sql.query("delete from schema_migrations where version = 20");

    const t = (minute: number) => new Date(Date.UTC(2024, 0, 1, 3, minute));
    // [slug, minute, error]: each firing, as the code before 0020 recorded it.
    const history: [string, number, string | null][] = [
      ["ok-then-refused", 1, null],
      ["ok-then-refused", 2, "cap"],
      ["refused-then-ok", 1, "old cap"],
      ["refused-then-ok", 2, null],
      ["only-refused", 1, "first"],
      ["only-refused", 2, "second"],
      ["only-ok", 1, null],
    ];
    for (const [slug, minute, error] of history)
      await db.sql.query(
        "insert into trigger_firings (project_id, slug, scheduled_at, error, created_at) values ($1, $2, $3, $4, $3)",
        [projectId, slug, t(minute), error],
      );
    // Before 0020 every firing moved last_fired_at; last_error was the latest firing's.
    for (const [slug, error] of [
      ["ok-then-refused", "cap"],
      ["refused-then-ok", null],
      ["only-refused", "second"],
      ["only-ok", null],
    ])
      await db.sql.query(
        "insert into trigger_state (project_id, slug, last_fired_at, last_error) values ($1, $2, $3, $4)",
        [projectId, slug, slug === "only-ok" ? t(1) : t(2), error],
      );

    expect(await migrate(db.sql, loadMigrations())).toEqual([20]);
    const states = await createTriggerStore(db.sql).states(projectId);
    const iso = (minute: number) => t(minute).toISOString();
    expect(Object.fromEntries(states)).toEqual({
      "ok-then-refused": {
        slug: "ok-then-refused",
        last_fired_at: iso(1),
        last_session_id: null,
        last_error: "cap",
        last_refused_at: iso(2),
        last_refusal: "cap",
      },
      "refused-then-ok": {
        slug: "refused-then-ok",
        last_fired_at: iso(2),
        last_session_id: null,
        last_error: null,
        last_refused_at: iso(1),
        last_refusal: "old cap",
      },
      "only-refused": {
        slug: "only-refused",
        last_fired_at: null,
        last_session_id: null,
        last_error: "second",
        last_refused_at: iso(2),
        last_refusal: "second",
      },
      "only-ok": {
        slug: "only-ok",
        last_fired_at: iso(1),
        last_session_id: null,
        last_error: null,
        last_refused_at: null,
        last_refusal: null,
      },
    });
  });
});
