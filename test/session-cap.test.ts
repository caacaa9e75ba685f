import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SandboxSettings } from "../api/app-options.ts";
import { openSql, type Sql } from "../api/db/sql.ts";
import type { SandboxDriver } from "../orchestrator/sandbox/driver.ts";
import { call, type Reply, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { hostOnlyDriver } from "./support/no-sandboxes.ts";
import { waitFor } from "./support/wait.ts";

const CAP = 3;
const MANIFEST = `[[triggers]]
slug = "nightly"
schedule = "0 3 * * *"
prompt = "Upgrade the dependencies"
`;

/**
 * A driver that runs no sandbox and records every sandbox verb: tearing down (remove) answers at once, anything that
 * would build or start one (images, containers) never does, so a session that got past the cap stays
 * `provisioning`, holding its slot, for the rest of the file.
 */
function recordingDriver(calls: string[]): SandboxDriver {
  return hostOnlyDriver((name, args) => {
    calls.push(`${name}(${args.filter((a) => typeof a === "string").join(", ")})`);
    return name === "remove" ? Promise.resolve() : new Promise(() => {});
  });
}

const settings: SandboxSettings = {
  sessionCap: CAP,
  sandboxApiOrigin: "http://host.docker.internal:1",
  hostAlias: "host.docker.internal",
  sandboxLink: "dial-out",
  provisionTimeoutMs: 600_000,
  limits: { memoryBytes: 1024 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 512 },
  llm: {},
  defaultAgent: "build",
};

/** The 429 every refused start answers: the cap, the setting that sets it and what frees a slot. */
function expectCapRefusal(res: Reply, current = CAP) {
  expect(res.status, JSON.stringify(res.body)).toBe(429);
  expect(res.body).toMatchObject({ code: "SESSION_CAP_REACHED", limit: CAP, current });
  expectCapMessage(res.body.error);
}
function expectCapMessage(message: string | null | undefined) {
  expect(message).toContain(`may run ${CAP} sessions at once`);
  expect(message).toContain("SVC_SESSION_CAP");
  expect(message).toContain("svc sessions stop <id>");
  expect(message).toContain("svc sessions rm <id>");
}

describe.each(databaseKinds("postgres"))("the session cap counts every start (%s)", (kind) => {
  let db: TestDatabase;
  /** Two API processes on one database: the second on a connection pool of its own (PostgreSQL). */
  let apis: TestApi[];
  let otherSql: Sql | undefined;
  const calls: string[] = [];

  type Account = { user: Awaited<ReturnType<typeof seedUser>>; projectId: string };

  /** A user with an account of its own and a project whose main holds MANIFEST. */
  async function account(label: string): Promise<Account> {
    const user = await seedUser(apis[0]!.services, label);
    const created = await call(apis[0]!.url, "POST", "/v1/projects", { token: user.token, body: { name: label } });
    expect(created.status).toBe(201);
    const work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("manifest", { "svc.toml": MANIFEST });
    await work.pushed("main");
    return { user, projectId: created.body.id };
  }

  /**
   * A session row as the orchestrator leaves one: `running` with an active sandbox in a container, or `stopped`
   * or `failed` with its sandbox gone.
   */
  async function seed(a: Account, status: "running" | "stopped" | "failed"): Promise<string> {
    const sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name,
         created_by, sandbox_url, error)
       values ($1, $2, $3, $4, $1, 'main', 'build', $5, $6, $7)`,
      [
        sessionId,
        a.user.accountId,
        a.projectId,
        status,
        a.user.userId,
        status === "running" ? "http://sandbox.test:8000" : null,
        status === "failed" ? "the sandbox did not start" : null,
      ],
    );
    await db.sql.query(
      `insert into session_sandboxes (session_id, project_id, status, service_key_hash, container_id, url)
       values ($1, $2, $3, $4, $5, 'http://sandbox.test:8000')`,
      [sessionId, a.projectId, status === "running" ? "active" : "stopped", randomUUID(), `container-${sessionId}`],
    );
    return sessionId;
  }

  /** Everything a start would change: the sessions' rows and their sandboxes' rows. */
  const snapshot = (a: Account) =>
    Promise.all([
      db.sql.query(
        `select session_id, status, error, sandbox_url, provisioner, progress, updated_at from project_sessions
         where account_id = $1 order by session_id`,
        [a.user.accountId],
      ),
      db.sql.query(
        `select b.sandbox_id, b.status, b.container_id, b.url, b.updated_at from session_sandboxes b
         join project_sessions s using (session_id) where s.account_id = $1 order by b.sandbox_id`,
        [a.user.accountId],
      ),
    ]);
  const live = async (a: Account) =>
    (
      await db.sql.query<{ n: number }>(
        "select count(*)::int as n from project_sessions where account_id = $1 and status in ('provisioning', 'running')",
        [a.user.accountId],
      )
    )[0]!.n;

  /** `n` requests at once, spread over both API processes. */
  const parallel = (n: number, request: (api: TestApi, i: number) => Promise<Reply>) =>
    Promise.all(Array.from({ length: n }, (_, i) => request(apis[i % apis.length]!, i)));
  const sessionsPath = (a: Account, suffix = "") => `/v1/projects/${a.projectId}/sessions${suffix}`;

  beforeAll(async () => {
    db = await freshDatabase(kind);
    const orchestrator = { driver: recordingDriver(calls), settings, root: process.cwd(), baseImage: "none" };
    const first = await startApi(db.sql, { orchestrator });
    otherSql = db.url ? await openSql({ databaseUrl: db.url }) : undefined;
    const second = await startApi(otherSql ?? db.sql, { orchestrator, dataDir: first.dataDir });
    apis = [first, second];
  });
  afterAll(async () => {
    for (const api of apis ?? []) await api.close();
    await otherSql?.close();
    await db?.drop();
  });

  it("refuses every restart of a stopped or failed session at the cap with 429, changing nothing", async () => {
    const a = await account("restarts");
    const running = [await seed(a, "running"), await seed(a, "running"), await seed(a, "running")];
    const idle = [
      ...(await Promise.all(Array.from({ length: 5 }, () => seed(a, "stopped")))),
      await seed(a, "failed"),
      await seed(a, "failed"),
    ];
    const before = await snapshot(a);
    calls.length = 0;

    const results = await parallel(7, (api, i) =>
      call(api.url, "POST", sessionsPath(a, `/${idle[i]}/restart`), { token: a.user.token }),
    );
    for (const res of results) expectCapRefusal(res);
    // Not a row moved, no sandbox touched, no container stopped or started.
    expect(await snapshot(a)).toEqual(before);
    expect(calls).toEqual([]);

    // A session restarted in place keeps its own slot: at the cap, a running one still restarts.
    const again = await call(apis[1]!.url, "POST", sessionsPath(a, `/${running[0]}/restart`), { token: a.user.token });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ session_id: running[0], status: "provisioning", error: null });
    expect(calls).toContain(`remove(container-${running[0]})`);
    expect(await live(a)).toBe(CAP);

    // One slot freed: of seven parallel restarts (wakes) exactly one gets it, on either API process.
    expect(
      (await call(apis[0]!.url, "POST", sessionsPath(a, `/${running[1]}/stop`), { token: a.user.token })).status,
    ).toBe(200);
    const woken = await parallel(7, (api, i) =>
      call(api.url, "POST", sessionsPath(a, `/${idle[i]}/restart`), { token: a.user.token }),
    );
    expect(woken.map((r) => r.status).sort()).toEqual([200, 429, 429, 429, 429, 429, 429]);
    for (const res of woken.filter((r) => r.status === 429)) expectCapRefusal(res);
    expect(await live(a)).toBe(CAP);
  });

  it("lets exactly as many parallel creates start as the cap has room for", async () => {
    const a = await account("creates");
    await seed(a, "running");
    await seed(a, "stopped");
    const results = await parallel(7, (api) =>
      call(api.url, "POST", sessionsPath(a), { token: a.user.token, body: {} }),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 201, 429, 429, 429, 429, 429]);
    for (const res of results.filter((r) => r.status === 429)) expectCapRefusal(res);
    const started = results.filter((r) => r.status === 201).map((r) => r.body.session_id as string);
    // Both got as far as a sandbox, where the driver holds them: `provisioning`, each holding its slot.
    await waitFor("the started sessions' sandboxes", async () => {
      const rows = await db.sql.query<{ session_id: string; status: string }>(
        `select s.session_id, s.status from project_sessions s join session_sandboxes b using (session_id)
         where s.session_id = any($1::text[]) and b.status = 'provisioning'`,
        [started],
      );
      return rows.length === 2 && rows.every((r) => r.status === "provisioning");
    });
    expect(await live(a)).toBe(CAP);
  });

  it("refuses a trigger firing at the cap and records the refusal on the firing and the trigger", async () => {
    const a = await account("triggers");
    for (let i = 0; i < CAP; i++) await seed(a, "running");
    const firings = () =>
      db.sql.query<{ manual: boolean; session_id: string | null; error: string | null }>(
        "select manual, session_id, error from trigger_firings where project_id = $1 order by scheduled_at",
        [a.projectId],
      );

    // `svc triggers fire`: the 429 of a create, and the firing's row says why no session came of it.
    const fired = await call(apis[1]!.url, "POST", `/v1/projects/${a.projectId}/triggers/nightly/fire`, {
      token: a.user.token,
    });
    expectCapRefusal(fired);
    const [manual] = await firings();
    expect(manual).toMatchObject({ manual: true, session_id: null });
    expectCapMessage(manual!.error);

    // The scheduler's firing (claimed instant, then the session): refused the same way, recorded, not lost.
    const port = apis[0]!.services.triggerPort;
    const at = new Date(Date.now() - 60_000);
    expect(await port.claim(a.projectId, "nightly", at)).toBe(true);
    const trigger = (await port.project(a.projectId))?.triggers?.find((t) => t.slug === "nightly");
    expect(trigger).toBeDefined();
    const out = await port.fire(a.projectId, trigger!, at);
    expect("error" in out && out.error).toBeTruthy();
    expectCapMessage("error" in out ? out.error : undefined);
    const all = await firings();
    expect(all).toHaveLength(2);
    expect(all[0]).toMatchObject({ manual: false, session_id: null });
    expectCapMessage(all[0]!.error);

    const info = await call(apis[0]!.url, "GET", `/v1/projects/${a.projectId}/triggers/nightly`, {
      token: a.user.token,
    });
    // Refused: no session fired, the refusal recorded with its reason.
    expect(info.body.last_fired_at).toBeNull();
    expect(info.body.last_session_id).toBeNull();
    expectCapMessage(info.body.last_error);
    expectCapMessage(info.body.last_refusal);
    // No session started by the trigger, and the cap holds.
    const triggered = await db.sql.query(
      "select 1 from project_sessions where trigger_slug = 'nightly' and project_id = $1",
      [a.projectId],
    );
    expect(triggered).toEqual([]);
    expect(await live(a)).toBe(CAP);
  });
});
