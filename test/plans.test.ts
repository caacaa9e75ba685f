import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, type Reply, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { hostOnlyDriver, settings } from "./support/no-sandboxes.ts";

/**
 * A driver whose sandboxes never come up: what builds or starts one never answers, so a started session stays
 * `provisioning`, holding its slot of the cap, for the rest of the file.
 */
const stalling = hostOnlyDriver(() => new Promise(() => {}));

const PLANS = { free: { session_cap: 1 }, team: { session_cap: 2 } };

describe.each(databaseKinds("postgres"))("plans: each account's session cap (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let admin: Awaited<ReturnType<typeof seedUser>>;
  type Account = { user: Awaited<ReturnType<typeof seedUser>>; projectId: string; slug: string };
  let free: Account;
  let team: Account;

  async function account(label: string): Promise<Account> {
    const user = await seedUser(api.services, label);
    const project = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: label } });
    // A default branch to cut session branches from: a session gets as far as its sandbox, which never comes.
    const work = await workRepo(authedUrl(project.body.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
    const [row] = await db.sql.query<{ slug: string }>("select slug from accounts where id = $1", [user.accountId]);
    return { user, projectId: project.body.id, slug: row!.slug };
  }
  const start = (a: Account) =>
    call(api.url, "POST", `/v1/projects/${a.projectId}/sessions`, { token: a.user.token, body: {} });
  const plan = (a: Account) => call(api.url, "GET", "/v1/accounts/plan", { token: a.user.token });
  const setPlan = (a: Account, body: unknown, token = admin.token) =>
    call(api.url, "PUT", `/v1/admin/accounts/${a.slug}/plan`, { token, body });

  function expectRefusal(res: Reply, planName: string, cap: number, source: string) {
    expect(res.status, JSON.stringify(res.body)).toBe(429);
    expect(res.body).toMatchObject({ code: "SESSION_CAP_REACHED", limit: cap, current: cap, plan: planName });
    expect(res.body.error).toContain(`on plan '${planName}' may run ${cap} sessions at once (${source})`);
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql, {
      orchestrator: { driver: stalling, settings, root: process.cwd(), baseImage: "none" },
      plans: { plans: PLANS, default: "free", setting: "SVC_PLANS" },
    });
    admin = await seedUser(api.services, "admin");
    await db.sql.query("update users set is_admin = true where id = $1", [admin.userId]);
    free = await account("free");
    team = await account("team");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("puts a new account on the default plan; the administrator moves one to another plan", async () => {
    expect((await plan(free)).body).toEqual({ plan: "free", session_cap: 1, sessions_live: 0 });
    expect((await plan(team)).body).toEqual({ plan: "free", session_cap: 1, sessions_live: 0 });
    const moved = await setPlan(team, { plan: "team" });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body).toEqual({ plan: "team", session_cap: 2, sessions_live: 0 });
    expect((await plan(team)).body.plan).toBe("team");

    // Only the installation's administrator, only a plan the stack has.
    expect((await setPlan(free, { plan: "team" }, free.user.token)).status).toBe(403);
    const unknown = await setPlan(free, { plan: "gold" });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ code: "VALIDATION_FAILED", field: "plan" });
    expect(unknown.body.error).toContain("free, team");
    expect(
      (await call(api.url, "PUT", "/v1/admin/accounts/nobody/plan", { token: admin.token, body: {} })).status,
    ).toBe(404);
    expect((await plan(free)).body.plan).toBe("free");
  });

  it("refuses a start past the account's own plan's cap with 429 naming the plan and the cap", async () => {
    expect((await start(free)).status).toBe(201);
    expectRefusal(await start(free), "free", 1, "the plan's session_cap in SVC_PLANS");
    expect((await plan(free)).body).toEqual({ plan: "free", session_cap: 1, sessions_live: 1 });

    // The other account's plan is its own: two sessions, then the refusal names team's cap.
    expect((await start(team)).status).toBe(201);
    expect((await start(team)).status).toBe(201);
    expectRefusal(await start(team), "team", 2, "the plan's session_cap in SVC_PLANS");
    expect((await plan(team)).body.sessions_live).toBe(2);
  });

  it("takes an account's own cap over its plan's, and drops it again", async () => {
    expect((await setPlan(team, { session_cap: 3 })).body).toEqual({ plan: "team", session_cap: 3, sessions_live: 2 });
    expect((await start(team)).status).toBe(201);
    const refused = await start(team);
    expectRefusal(refused, "team", 3, "this account's own cap, set by the installation's administrator");
    expect((await setPlan(team, { session_cap: null, plan: null })).body).toEqual({
      plan: "free",
      session_cap: 1,
      sessions_live: 3,
    });
  });
});
