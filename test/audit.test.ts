import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_EMAIL } from "../api/accounts/bootstrap.ts";
import { recordQueueMerge } from "../api/audit/queue-merges.ts";
import { createChangeRequestStore } from "../api/change-requests/store.ts";
import { advanceMergeQueue } from "../api/checks/merge-queue.ts";
import type { ReviewState } from "../api/checks/review-state.ts";
import { csrfToken } from "../api/dashboard/browser-sessions.ts";
import type { AuditEvent } from "../protocol/audit.ts";
import type { ChangeRequestRecord } from "../protocol/change-request.ts";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { type ApiProcess, startApiProcess } from "./support/api-process.ts";
import { call, type Reply, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { cliHome, svc, svcTty } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";

/** What a person reads of an entry: act, actor, resource and the names it keeps. */
const brief = (e: AuditEvent) => ({
  action: e.action,
  email: e.actor.email,
  kind: e.actor.kind,
  resource: `${e.resource.type} ${e.resource.id ?? "-"}`,
  names: e.details.names,
});

describe.each(databaseKinds("postgres"))("the audit log: who did what and when, never a value (%s)", (kind) => {
  let db: TestDatabase | undefined;
  let api: ApiProcess;
  let home: string;
  const adminToken = newSecret("svc_pat_");
  /** A secret's value and a minted token: neither may appear in the log, the audit log or its answers. */
  const secretValue = `s3cr3t-${randomBytes(12).toString("hex")}`;
  let mintedSecret = "";
  let project: { id: string; repo_url: string };
  let work: WorkRepo;
  let mintedId = "";

  const as = (method: string, path: string, body?: unknown) => call(api.url, method, path, { token: adminToken, body });
  const audit = async (query = ""): Promise<Reply> => as("GET", `/v1/accounts/audit${query}`);

  /** A branch one commit ahead of main, pushed. */
  async function topic(name: string): Promise<string> {
    await work.checkout(name, { create: true, from: "main" });
    await work.commit(name, { [`${name}.txt`]: `${name}\n` });
    await work.pushed(name);
    await work.checkout("main");
    return name;
  }

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "svc-audit-"));
    db = kind === "postgres" ? await freshDatabase("postgres", { migrated: false }) : undefined;
    api = await startApiProcess({
      SVC_HOME: home,
      SVC_LOG_LEVEL: "trace",
      SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(adminToken),
      SVC_SECRETS_KEY: randomBytes(32).toString("base64"),
      ...(db?.url ? { DATABASE_URL: db.url } : {}),
    });
    project = (await as("POST", "/v1/projects", { name: "Audited" })).body;
    work = await workRepo(authedUrl(project.repo_url, adminToken));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
  });
  afterAll(async () => {
    await api?.stop();
    await db?.drop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it("records merges, closes, token mints and revocations, secrets set and unset, in order, with their actor", async () => {
    const crs = `/v1/projects/${project.id}/change-requests`;
    const merging = (await as("POST", crs, { title: "Merged", head_ref: await topic("merged") })).body;
    const merged = await as("POST", `${crs}/${merging.number}/merge`, { head_sha: merging.head_commit_sha });
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
    const closing = (await as("POST", crs, { title: "Closed", head_ref: await topic("closed") })).body;
    expect((await as("POST", `${crs}/${closing.number}/close`)).status).toBe(200);
    const minted = await as("POST", "/v1/accounts/tokens", { name: "ci" });
    expect(minted.status).toBe(201);
    mintedSecret = minted.body.token;
    mintedId = minted.body.id;
    expect((await as("DELETE", `/v1/accounts/tokens/${mintedId}`)).status).toBe(204);
    const secrets = `/v1/projects/${project.id}/secrets`;
    expect((await as("PUT", secrets, { secrets: { DB_PASSWORD: secretValue } })).status).toBe(200);
    expect((await as("DELETE", secrets, { names: ["DB_PASSWORD"] })).status).toBe(200);
    // Refused acts are not acts: a second merge of the merged CR (409) records nothing.
    expect((await as("POST", `${crs}/${merging.number}/merge`)).status).toBe(409);

    const read = await audit();
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    const events: AuditEvent[] = read.body.events;
    const admin = { email: ADMIN_EMAIL, kind: "user" };
    expect(events.map(brief)).toEqual([
      { action: "secrets.unset", ...admin, resource: "secrets -", names: ["DB_PASSWORD"] },
      { action: "secrets.set", ...admin, resource: "secrets -", names: ["DB_PASSWORD"] },
      { action: "token.revoke", ...admin, resource: `token ${mintedId}`, names: undefined },
      { action: "token.mint", ...admin, resource: `token ${mintedId}`, names: undefined },
      { action: "cr.close", ...admin, resource: `change_request ${closing.number}`, names: undefined },
      { action: "cr.merge", ...admin, resource: `change_request ${merging.number}`, names: undefined },
      { action: "project.create", ...admin, resource: `project ${project.id}`, names: undefined },
    ]);
    // Newest first, each with its time, request, client and answer; the merge's body fields by name only.
    expect(events.map((e) => e.id)).toEqual([...events.map((e) => e.id)].sort((a, b) => b - a));
    for (const e of events) {
      expect(e).toMatchObject({ project_id: e.action.startsWith("token.") ? null : project.id });
      expect(e.request_id).toBeTruthy();
      expect(e.client_address).toBe("127.0.0.1");
      expect(Date.parse(e.at)).toBeGreaterThan(Date.now() - 120_000);
    }
    expect(events.map((e) => e.status)).toEqual([200, 200, 204, 201, 200, 200, 201]);
    expect(events.find((e) => e.action === "cr.merge")!.details.fields).toEqual(["head_sha"]);

    // No value anywhere: not in the audit log's answer, not in anything the API logged.
    const text = JSON.stringify(read.body);
    expect(text).not.toContain(secretValue);
    expect(text).not.toContain(mintedSecret);
    expect(api.log()).toContain("/secrets");
    expect(api.log()).not.toContain(secretValue);
    expect(api.log()).not.toContain(mintedSecret);
  });

  it("pages newest first with ?limit= and ?before=, and refuses bad input with 400 naming the field", async () => {
    const all: AuditEvent[] = (await audit()).body.events;
    const first = await audit("?limit=2");
    expect(first.body.events).toEqual(all.slice(0, 2));
    expect(first.body.next_before).toBe(all[1]!.id);
    const second = await audit(`?limit=2&before=${first.body.next_before}`);
    expect(second.body.events).toEqual(all.slice(2, 4));
    const rest = await audit(`?before=${all[3]!.id}`);
    expect(rest.body).toEqual({ events: all.slice(4), next_before: null });
    for (const [query, field] of <[string, string][]>[
      ["?limit=0", "limit"],
      ["?limit=501", "limit"],
      ["?limit=ten", "limit"],
      ["?before=-3", "before"],
      ["?after=3", "after"],
    ]) {
      const res = await audit(query);
      expect(res.status, query).toBe(400);
      expect(res.body, query).toMatchObject({ code: "VALIDATION_FAILED", field });
    }
    // Account routes take user tokens only.
    const projectToken = (await as("POST", `/v1/projects/${project.id}/cli-token`)).body.token;
    const refused = await call(api.url, "GET", "/v1/accounts/audit", { token: projectToken });
    expect(refused.status).toBe(403);
  });

  it("is append-only: no route changes or deletes it, and a later read holds the earlier one unchanged", async () => {
    const before: AuditEvent[] = (await audit()).body.events;
    for (const method of ["DELETE", "PUT", "PATCH", "POST"]) {
      expect((await as(method, "/v1/accounts/audit")).status, method).toBe(404);
      expect((await as(method, `/v1/accounts/audit/${before[0]!.id}`)).status, method).toBe(404);
    }
    expect((await as("PUT", `/v1/projects/${project.id}/secrets`, { secrets: { OTHER: "x" } })).status).toBe(200);
    const after: AuditEvent[] = (await audit()).body.events;
    expect(after.length).toBe(before.length + 1);
    expect(after.slice(1)).toEqual(before);
  });

  it("svc audit prints the active account's log: JSON, a table at a terminal, tab-separated rows in a pipe", async () => {
    const home = cliHome();
    const login = await svc(["login", "--host", "audit", "--api", api.url, "--token", adminToken], { env: home.env });
    expect(login.code, login.stderr).toBe(0);
    const events: AuditEvent[] = (await audit("?limit=3")).body.events;
    const json = await svc(["audit", "--json", "--limit", "3"], { env: home.env });
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(events);

    const piped = await svc(["audit", "--limit", "3"], { env: home.env });
    expect(piped.code, piped.stderr).toBe(0);
    const rows = piped.stdout
      .trim()
      .split("\n")
      .map((line) => line.split("\t"));
    expect(rows.map((r) => r.slice(1))).toEqual(events.map((e) => [ADMIN_EMAIL, e.action, expect.any(String)]));
    expect(rows[0]![3]).toBe("secrets OTHER");

    const tty = await svcTty(["audit", "--limit", "2"], { env: home.env });
    expect(tty.code, tty.output).toBe(0);
    expect(tty.output).toMatch(/^WHEN\s+ACTOR\s+ACTION\s+RESOURCE/m);
    expect(tty.output).toContain("secrets.set");

    expect((await svc(["audit", "--limit", "0"], { env: home.env })).code).toBe(2);
  });
});

describe.each(databaseKinds("postgres"))("acts that no REST call makes, and the dashboard's (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };
  let work: WorkRepo;

  const crs = () => `/v1/projects/${project.id}/change-requests`;
  const events = async (): Promise<AuditEvent[]> =>
    (await call(api.url, "GET", "/v1/accounts/audit", { token: user.token })).body.events;

  async function openCr(name: string) {
    await work.checkout(name, { create: true, from: "main" });
    await work.commit(name, { [`${name}.txt`]: `${name}\n` });
    await work.pushed(name);
    await work.checkout("main");
    return (await call(api.url, "POST", crs(), { token: user.token, body: { title: name, head_ref: name } })).body;
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    user = await seedUser(api.services, "auditor");
    project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Queued" } })).body;
    work = await workRepo(authedUrl(project.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("is append-only in the database too: its table refuses updates, deletes and truncation", async () => {
    const count = async () => (await db.sql.query<{ n: number }>("select count(*)::int as n from audit_events"))[0]!.n;
    const before = await count();
    expect(before).toBeGreaterThan(0);
    for (const statement of [
      "update audit_events set action = 'nothing'",
      "delete from audit_events",
      "truncate audit_events",
    ])
      await expect(db.sql.query(statement), statement).rejects.toThrow(/append-only/);
    expect(await count()).toBe(before);
  });

  it("records the merge queue's merge once, as the person who queued it", async () => {
    const cr = await openCr("queued");
    const queued = await call(api.url, "POST", `${crs()}/${cr.number}/merge`, {
      token: user.token,
      body: { auto: true },
    });
    expect(queued.status).toBe(202);
    // One step of the queue as the check scheduler takes it, its review saying the checks passed.
    const review = {
      present: async (_p: unknown, records: ChangeRequestRecord[]) =>
        records.map((r) => ({ ...r, checks_status: "passed", mergeable: true, approvals: 0, required_approvals: 0 })),
      current: async () => [],
    } as unknown as ReviewState;
    await advanceMergeQueue({
      crStore: createChangeRequestStore(db.sql),
      changeRequests: api.services.changeRequests,
      review,
      projects: api.services.projects,
      recordMerge: recordQueueMerge(api.services.audit),
      log: () => {},
    });
    const now = (await call(api.url, "GET", `${crs()}/${cr.number}`, { token: user.token })).body.change_request;
    expect(now.status).toBe("merged");

    const recorded = (await events()).filter((e) => e.resource.id === String(cr.number));
    expect(recorded.map((e) => [e.action, e.actor.user_id, e.status, e.details.via])).toEqual([
      ["cr.merge", user.userId, null, "merge_queue"],
      ["cr.auto_merge.on", user.userId, 202, undefined],
    ]);
  });

  it("records the dashboard's merge and shows the log on the dashboard's audit page", async () => {
    const cr = await openCr("dashboard");
    const { secret } = await api.services.browserSessions.open(user.userId);
    const browser = { cookie: `svc_dashboard=${secret}`, origin: api.url };
    const merged = await fetch(`${api.url}/dashboard/projects/${project.id}/crs/${cr.number}/merge`, {
      method: "POST",
      headers: { ...browser, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ _csrf: csrfToken(secret), head_sha: cr.head_commit_sha }),
      redirect: "manual",
    });
    expect(merged.status).toBe(303);
    const [latest] = await events();
    expect(latest).toMatchObject({
      action: "cr.merge",
      actor: { user_id: user.userId, kind: "user" },
      resource: { type: "change_request", id: String(cr.number) },
      status: 303,
      details: { fields: ["head_sha"] },
    });

    const page = await fetch(`${api.url}/dashboard/audit`, { headers: browser });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('href="/dashboard/audit"');
    expect(html).toMatch(/<td class="mono">cr\.merge<\/td>/);
    expect(html).toContain(`change_request <span class="mono">${cr.number}</span>`);
  });
});
