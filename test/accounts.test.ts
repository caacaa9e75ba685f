import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { csrfToken } from "../api/dashboard/browser-sessions.ts";
import type { AuditEvent } from "../protocol/audit.ts";
import { call, seedMember, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { noSandboxes, settings } from "./support/no-sandboxes.ts";

type Person = Awaited<ReturnType<typeof seedUser>>;
type Project = { id: string; slug: string; account_id: string; repo_url: string };

describe.each(databaseKinds("postgres"))("several accounts per person, each its own world (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  /** Owner of account A, admin in B (joined later: A stays her first). */
  let alice: Person;
  /** Owner of account B. */
  let bob: Person;
  /** A member of A only. */
  let carol: Person;
  const slugs = { a: "", b: "" };
  let alpha: Project;
  let beta: Project;
  let betaSession = "";
  let betaCr = 0;
  let home: { env: CliEnv };

  const run = (args: string[]) => svc(args, { env: home.env });
  const as = (person: Person, method: string, path: string, options: { body?: unknown; account?: string } = {}) =>
    call(api.url, method, path, {
      token: person.token,
      body: options.body,
      headers: options.account ? { "x-svc-account": options.account } : {},
    });
  /** The emails a members page lists. */
  const emailsOn = async (page: string) => [...page.matchAll(/[\w.+-]+@[\w.-]+\.test/g)].map((m) => m[0]);
  const emailOf = async (p: Person) =>
    (await db.sql.query<{ email: string }>("select email from users where id = $1", [p.userId]))[0]!.email;

  beforeAll(async () => {
    db = await freshDatabase(kind);
    // Sessions' routes answer: a session service over a driver that starts no sandbox.
    api = await startApi(db.sql, {
      orchestrator: { driver: noSandboxes, settings, root: process.cwd(), baseImage: "none" },
    });
    alice = await seedUser(api.services, "alice");
    bob = await seedUser(api.services, "bob");
    carol = await seedMember(api.services, alice.accountId, "member", "carol");
    await db.sql.query(
      "insert into memberships (account_id, user_id, role, created_at) values ($1, $2, 'admin', now() + interval '1 second')",
      [bob.accountId, alice.userId],
    );
    const [a, b] = await Promise.all(
      [alice, bob].map(
        async (p) =>
          (await db.sql.query<{ slug: string }>("select slug from accounts where id = $1", [p.accountId]))[0]!.slug,
      ),
    );
    slugs.a = a!;
    slugs.b = b!;
    alpha = (await as(alice, "POST", "/v1/projects", { body: { name: "Alpha" } })).body;
    beta = (await as(bob, "POST", "/v1/projects", { body: { name: "Beta" } })).body;
    expect(beta.account_id).toBe(bob.accountId);
    expect(
      (await as(bob, "PUT", `/v1/projects/${beta.id}/secrets`, { body: { secrets: { BETA_KEY: "b-value" } } })).status,
    ).toBe(200);
    const work = await workRepo(authedUrl(beta.repo_url, bob.token));
    await work.commit("initial", { "README.md": "beta\n" });
    await work.checkout("topic", { create: true });
    await work.commit("topic", { "topic.txt": "topic\n" });
    await work.pushed("main", "topic");
    betaCr = (
      await as(bob, "POST", `/v1/projects/${beta.id}/change-requests`, { body: { title: "T", head_ref: "topic" } })
    ).body.number;
    betaSession = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, 'stopped', $1, 'main', 'build', $4)`,
      [betaSession, bob.accountId, beta.id, bob.userId],
    );
    await db.sql.query(
      `insert into session_sandboxes (session_id, project_id, status, service_key_hash, created_at, stopped_at)
       values ($1, $2, 'stopped', $3, now() - interval '10 minutes', now() - interval '5 minutes')`,
      [betaSession, beta.id, randomUUID()],
    );
    home = cliHome();
    const login = await run(["login", "--host", "multi", "--api", api.url, "--token", alice.token]);
    expect(login.code, login.stderr).toBe(0);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("svc accounts use switches the active account: whoami, accounts ls, projects, audit and usage follow", async () => {
    const email = await emailOf(alice);
    const whoami = await run(["whoami"]);
    expect(whoami.stdout.trim()).toBe(`${email}\t${slugs.a}`);
    const listed = await run(["accounts", "ls", "--json"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id: alice.accountId, slug: slugs.a, role: "owner", active: true }),
      expect.objectContaining({ id: bob.accountId, slug: slugs.b, role: "admin", active: false }),
    ]);
    expect((await run(["accounts", "ls"])).stdout).toBe(`*\t${slugs.a}\talice\towner\n \t${slugs.b}\tbob\tadmin`);
    const projects = async () =>
      JSON.parse((await run(["projects", "ls", "--json"])).stdout).map((p: Project) => p.slug);
    expect(await projects()).toEqual([alpha.slug]);
    const auditOf = async () => JSON.parse((await run(["audit", "--json"])).stdout) as AuditEvent[];
    expect((await auditOf()).map((e) => [e.action, e.project_id])).toEqual([["project.create", alpha.id]]);

    const use = await run(["accounts", "use", slugs.b]);
    expect(use.code, use.stderr).toBe(0);
    expect(use.stderr).toContain(`${slugs.b} is the active account on multi`);
    expect(JSON.parse(readFileSync(home.env.SVC_CONFIG_FILE!, "utf8")).hosts.multi.account).toBe(bob.accountId);
    expect((await run(["whoami"])).stdout.trim()).toBe(`${email}\t${slugs.b}`);
    expect(
      JSON.parse((await run(["accounts", "ls", "--json"])).stdout).map((a: { active: boolean }) => a.active),
    ).toEqual([false, true]);
    expect(await projects()).toEqual([beta.slug]);
    expect((await auditOf()).map((e) => [e.action, e.project_id])).toEqual([
      ["secrets.set", beta.id],
      ["project.create", beta.id],
    ]);
    // A project created now lands in the active account.
    const created = await run(["projects", "create", "Gamma", "--json"]);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).account_id).toBe(bob.accountId);
    expect((await projects()).sort()).toEqual([beta.slug, "gamma"].sort());

    // Usage of the account the header names: its projects only.
    const usage = async (account?: string) => (await as(alice, "GET", "/v1/accounts/usage", { account })).body;
    const projectsUsed = (await usage(slugs.b)).days.map((d: { project_id: string }) => d.project_id);
    expect([...new Set(projectsUsed)]).toEqual([beta.id]);
    expect((await usage(slugs.b)).totals.sandbox_seconds).toBe(300);
    expect((await usage()).days).toEqual([]);

    // By name or id too; an account that is not hers is refused, and nothing changes.
    expect((await run(["accounts", "use", alice.accountId])).code).toBe(0);
    expect((await run(["whoami"])).stdout.trim()).toBe(`${email}\t${slugs.a}`);
    const refused = await run(["accounts", "use", "nobody"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`yours: ${slugs.a}, ${slugs.b}`);
    expect((await run(["whoami"])).stdout.trim()).toBe(`${email}\t${slugs.a}`);
  });

  it("the dashboard's account pages show the account the browser chose; a stranger's account cannot be chosen", async () => {
    const { secret } = await api.services.browserSessions.open(alice.userId);
    const browse = async (path: string, extra = "") =>
      fetch(`${api.url}${path}`, { headers: { cookie: `svc_dashboard=${secret}${extra}` }, redirect: "manual" });
    const choose = (account: string) =>
      fetch(`${api.url}/dashboard/account`, {
        method: "POST",
        redirect: "manual",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          origin: api.url,
          cookie: `svc_dashboard=${secret}`,
        },
        body: new URLSearchParams({ _csrf: csrfToken(secret), account, next: "/dashboard/members" }).toString(),
      });
    const first = await (await browse("/dashboard/members")).text();
    expect(first).toContain(`<option value="${slugs.b}">`);
    expect(await emailsOn(first)).toContain(await emailOf(carol));

    const chose = await choose(slugs.b);
    expect(chose.status).toBe(303);
    expect(chose.headers.get("location")).toBe("/dashboard/members");
    const cookie = chose.headers.get("set-cookie")!.split(";")[0]!;
    const members = await (await browse("/dashboard/members", `; ${cookie}`)).text();
    expect(await emailsOn(members)).toContain(await emailOf(bob));
    expect(await emailsOn(members)).not.toContain(await emailOf(carol));
    const audit = await (await browse("/dashboard/audit", `; ${cookie}`)).text();
    expect(audit).toContain(`<h1>Audit log of `);
    expect(audit).toContain(`<option value="${slugs.b}" selected>`);

    // Carol is in A only: choosing B is refused, and a cookie naming it shows her own account.
    const { secret: carols } = await api.services.browserSessions.open(carol.userId);
    const refused = await fetch(`${api.url}/dashboard/account`, {
      method: "POST",
      redirect: "manual",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: api.url,
        cookie: `svc_dashboard=${carols}`,
      },
      body: new URLSearchParams({ _csrf: csrfToken(carols), account: slugs.b }).toString(),
    });
    expect(refused.status).toBe(403);
    const hers = await fetch(`${api.url}/dashboard/members`, {
      headers: { cookie: `svc_dashboard=${carols}; ${cookie}` },
    });
    expect(await emailsOn(await hers.text())).not.toContain(await emailOf(bob));
  });

  it("an active account she has left is refused with the way out, and svc accounts use still works", async () => {
    expect((await run(["accounts", "use", "bob"])).code).toBe(0);
    await db.sql.query("delete from memberships where account_id = $1 and user_id = $2", [bob.accountId, alice.userId]);
    try {
      const stale = await run(["whoami"]);
      expect(stale.code).toBe(1);
      expect(stale.stderr).toContain("svc accounts use");
      expect((await run(["accounts", "use", slugs.a])).code).toBe(0);
      expect((await run(["whoami"])).code).toBe(0);
    } finally {
      await db.sql.query("insert into memberships (account_id, user_id, role) values ($1, $2, 'admin')", [
        bob.accountId,
        alice.userId,
      ]);
    }
  });

  it("a member of A reaches nothing of B: projects, CRs, sessions, secrets' names, audit, usage, plan", async () => {
    const forbidden = [403, 404];
    expect((await as(carol, "GET", "/v1/projects")).body.projects.map((p: Project) => p.slug)).toEqual([alpha.slug]);
    for (const path of [
      `/v1/projects/${beta.id}`,
      `/v1/projects/${beta.slug}`,
      `/v1/projects/${beta.id}/change-requests`,
      `/v1/projects/${beta.id}/change-requests/${betaCr}`,
      `/v1/projects/${beta.id}/secrets`,
      `/v1/projects/${beta.id}/sessions`,
      `/v1/projects/${beta.id}/sessions/${betaSession}`,
      `/v1/sessions/${betaSession}`,
      `/v1/projects/${beta.id}/triggers`,
    ]) {
      const res = await as(carol, "GET", path);
      expect(forbidden, `${path}: ${res.status}`).toContain(res.status);
      expect(JSON.stringify(res.body)).not.toContain("BETA_KEY");
    }
    expect((await as(carol, "PUT", `/v1/projects/${beta.id}/secrets`, { body: { secrets: { X: "y" } } })).status).toBe(
      403,
    );
    // Naming B, by slug, id or account_id, gets her nothing of it.
    for (const account of [slugs.b, bob.accountId]) {
      for (const path of [
        "/v1/accounts/me",
        "/v1/accounts/usage",
        "/v1/accounts/plan",
        "/v1/accounts/audit",
        "/v1/projects",
      ]) {
        const res = await as(carol, "GET", path, { account });
        expect(res.status, `${path} as ${account}`).toBe(403);
        expect(res.body.code).toBe("NOT_A_MEMBER");
      }
    }
    expect((await as(carol, "GET", `/v1/accounts/usage?account_id=${bob.accountId}`)).status).toBe(403);
    // Her own account's usage and plan: A's only.
    expect((await as(carol, "GET", "/v1/accounts/usage")).body.days).toEqual([]);
    expect((await as(carol, "GET", "/v1/accounts/plan")).body).toEqual({
      plan: "selfhost",
      session_cap: settings.sessionCap,
      sessions_live: 0,
    });

    // Each account's audit log is its own.
    const auditOf = async (person: Person, account?: string) =>
      JSON.stringify((await as(person, "GET", "/v1/accounts/audit", { account })).body);
    const ofA = await auditOf(alice);
    expect(ofA).toContain(alpha.id);
    expect(ofA).not.toContain(beta.id);
    expect(ofA).not.toContain("BETA_KEY");
    const ofB = await auditOf(bob);
    expect(ofB).toContain("BETA_KEY");
    expect(ofB).not.toContain(alpha.id);
  });
});
