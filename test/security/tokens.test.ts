import { randomUUID } from "node:crypto";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN_DAYS, bootstrapAdmin } from "../../api/accounts/bootstrap.ts";
import { loadMigrations, migrate } from "../../api/db/migrate.ts";
import { git } from "../../api/git/run.ts";
import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { SERVICE_KEY_PREFIX, TOKEN_PREFIX } from "../../protocol/token.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { cliHome, svc } from "../support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, GIT_ENV, type WorkRepo, workRepo } from "../support/git-fixture.ts";

/**
 * Issue 10, item 1: an agent cannot merge, cannot mint tokens, and nothing it holds outlives its sandbox.
 * The sandbox rows are written as provisioning writes them (session token minted with its session, then the
 * sandbox row that references it), without Docker.
 */
describe.each(databaseKinds("pglite"))("what a session's credentials may do, and for how long (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };
  let work: WorkRepo;
  let branches = 0;

  const crs = (suffix: string) => `/v1/projects/${project.id}/change-requests${suffix}`;
  const as = (token: string) => ({
    get: (path: string) => call(api.url, "GET", path, { token }),
    post: (path: string, body?: unknown) => call(api.url, "POST", path, { token, body }),
    patch: (path: string, body?: unknown) => call(api.url, "PATCH", path, { token, body }),
  });
  const mainTip = async () =>
    (await git(["rev-parse", "refs/heads/main"], { dir: api.services.repos.managedDir(project.id) })).stdout.trim();
  /** Whether git can list the project's refs with this secret as the Basic password. */
  const gitReaches = async (secret: string) =>
    (await execa("git", ["ls-remote", authedUrl(project.repo_url, secret)], { env: GIT_ENV, reject: false }))
      .exitCode === 0;

  /** A pushed branch one commit ahead of main. */
  async function topic(): Promise<string> {
    branches += 1;
    const name = `topic-${branches}`;
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(name, { create: true, from: "origin/main" });
    await work.commit(name, { [`${name}.txt`]: `${name}\n` });
    await work.pushed(name);
    return name;
  }

  /** A running session with its sandbox, holding a session token and a service key, as provisioning leaves it. */
  async function sandbox(options: { bind?: boolean } = {}) {
    const sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, 'running', $1, 'main', 'build', $4)`,
      [sessionId, user.accountId, project.id, user.userId],
    );
    const minted = await api.services.tokens.mint({
      userId: user.userId,
      projectId: project.id,
      name: `session ${sessionId}`,
      sessionId,
    });
    const serviceKey = newSecret(SERVICE_KEY_PREFIX);
    let sandboxId = "";
    if (options.bind !== false) {
      const [row] = await db.sql.query<{ sandbox_id: string }>(
        `insert into session_sandboxes (session_id, project_id, status, service_key_hash, token_id)
         values ($1, $2, 'active', $3, $4) returning sandbox_id`,
        [sessionId, project.id, hashSecret(serviceKey), minted.id],
      );
      sandboxId = row!.sandbox_id;
    }
    return {
      sessionId,
      token: minted.token,
      tokenId: minted.id,
      serviceKey,
      /** The sandbox row moves on and nobody revokes anything: what a missed revocation leaves behind. */
      setStatus: (status: string) =>
        db.sql.query("update session_sandboxes set status = $2 where sandbox_id = $1", [sandboxId, status]),
    };
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Guarded" } })).body;
    work = await workRepo(authedUrl(project.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("a session token opens, reads, edits, closes and reopens CRs, but cannot merge one (SPEC rule 4)", async () => {
    const agent = as((await sandbox()).token);
    const head = await topic();
    const opened = await agent.post(crs(""), { title: "Agent work", head_ref: head });
    expect(opened.status).toBe(201);
    const id = opened.body.cr_id;
    expect((await agent.get(crs(""))).status).toBe(200);
    expect((await agent.get(crs(`/${id}`))).status).toBe(200);
    expect((await agent.get(crs(`/${id}/diff`))).status).toBe(200);
    expect((await agent.get(crs(`/${id}/merge-preview`))).body.can_merge).toBe(true);
    expect((await agent.patch(crs(`/${id}`), { title: "Agent work, edited" })).status).toBe(200);
    expect((await agent.post(crs(`/${id}/close`))).body.status).toBe("closed");
    expect((await agent.post(crs(`/${id}/reopen`))).body.status).toBe("open");

    const before = await mainTip();
    for (const ref of [id, String(opened.body.number), `#${opened.body.number}`]) {
      const merge = await agent.post(crs(`/${encodeURIComponent(ref)}/merge`), {});
      expect(merge.status, ref).toBe(403);
      expect(merge.body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");
    }
    expect((await agent.get(crs(`/${id}`))).body.change_request.status).toBe("open");
    expect(await mainTip()).toBe(before);

    // The person merges with their own login.
    const merged = await as(user.token).post(crs(`/${id}/merge`), {});
    expect(merged.status).toBe(200);
    expect(merged.body).toMatchObject({ status: "merged", merged_by: user.userId });
  });

  it("`svc cr merge` inside the sandbox fails with exit 1 and leaves the CR open", async () => {
    const agent = await sandbox();
    const cr = (await as(agent.token).post(crs(""), { title: "Via the CLI", head_ref: await topic() })).body;
    const env = {
      ...cliHome().env,
      SVC_CLI_TOKEN: agent.token,
      SVC_EXECUTOR_TOKEN: agent.token,
      SVC_API_URL: `${api.url}/v1`,
      SVC_PROJECT_ID: project.id,
    };
    const show = await svc(["cr", "show", String(cr.number)], { env });
    expect(show.code, show.stderr).toBe(0);
    const merge = await svc(["cr", "merge", String(cr.number)], { env });
    expect(merge.code).toBe(1);
    expect(merge.stderr).toMatch(/merg/i);
    expect((await as(user.token).get(crs(`/${cr.cr_id}`))).body.change_request.status).toBe("open");
  });

  it("a project token the user minted merges as that user: it acts as its person (issue 32), a sandbox's never", async () => {
    const minted = await as(user.token).post(`/v1/projects/${project.id}/cli-token`, { name: "ci" });
    expect(minted.status).toBe(201);
    const cr = (await as(user.token).post(crs(""), { title: "Scripted", head_ref: await topic() })).body;
    const merge = await as(minted.body.token).post(crs(`/${cr.cr_id}/merge`), {});
    expect(merge.status, JSON.stringify(merge.body)).toBe(200);
    expect(merge.body).toMatchObject({ status: "merged", merged_by: user.userId });
  });

  it("a project token mints no further tokens", async () => {
    const userMinted = (await as(user.token).post(`/v1/projects/${project.id}/cli-token`)).body.token;
    for (const token of [(await sandbox()).token, userMinted]) {
      const again = await as(token).post(`/v1/projects/${project.id}/cli-token`, { name: "more" });
      expect(again.status).toBe(403);
      expect(again.body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");
      expect((await as(token).post("/v1/accounts/tokens", {})).status).toBe(403);
    }
    expect((await as(user.token).post(`/v1/projects/${project.id}/cli-token`)).status).toBe(201);
  });

  it("a session token is refused once its sandbox is no longer live, revoked or not", async () => {
    const project_ = `/v1/projects/${project.id}`;
    // Used while live, then the sandbox stops without a revocation: refused within the 5 s lookup cache.
    const stopped = await sandbox();
    expect((await as(stopped.token).get(project_)).status).toBe(200);
    expect(await gitReaches(stopped.token)).toBe(true);
    await stopped.setStatus("stopped");
    await expect.poll(async () => (await as(stopped.token).get(project_)).status, { timeout: 8000 }).toBe(401);
    expect(await gitReaches(stopped.token)).toBe(false);

    // Never used before its sandbox failed: refused at once.
    const failed = await sandbox();
    await failed.setStatus("error");
    expect((await as(failed.token).get(project_)).status).toBe(401);
    expect(await gitReaches(failed.token)).toBe(false);

    // Its session was removed (the sandbox row goes with it).
    const removed = await sandbox();
    await db.sql.query("delete from project_sessions where session_id = $1", [removed.sessionId]);
    expect((await as(removed.token).get(project_)).status).toBe(401);

    // Minted for a session but never handed to a sandbox (a provisioning that died in between).
    const orphan = await sandbox({ bind: false });
    expect((await as(orphan.token).get(project_)).status).toBe(401);

    // A revocation in this process applies at once, cache or not.
    const revoked = await sandbox();
    expect((await as(revoked.token).get(project_)).status).toBe(200);
    await api.services.tokens.revoke(revoked.tokenId);
    expect((await as(revoked.token).get(project_)).status).toBe(401);

    // A project token a user minted is bound to no sandbox: it keeps working.
    const userMinted = (await as(user.token).post(`${project_}/cli-token`)).body.token;
    expect((await as(userMinted).get(project_)).status).toBe(200);
  });

  it("a clone credential stops working when its sandbox stops", async () => {
    const credential = async (secret: string) => {
      const res = await as(secret).get(`/v1/projects/${project.id}/git/clone-credential`);
      expect(res.status).toBe(200);
      return res.body.password as string;
    };
    const live = await sandbox();
    // Fetched by the daemon with the service key, or by the agent's CLI with its session token.
    const fromServiceKey = await credential(live.serviceKey);
    const fromSessionToken = await credential(live.token);
    const fromUser = await credential(user.token);
    for (const secret of [fromServiceKey, fromSessionToken, fromUser]) expect(await gitReaches(secret)).toBe(true);

    await live.setStatus("stopped");
    // Credentials are looked up uncached: refused at once.
    expect(await gitReaches(fromServiceKey)).toBe(false);
    expect(await gitReaches(fromSessionToken)).toBe(false);
    expect(await gitReaches(fromUser)).toBe(true);
    expect((await as(live.serviceKey).get(`/v1/projects/${project.id}/git/clone-credential`)).status).toBe(401);
  });
});

/**
 * Issue 26, item 2: every token has an expiry (browser logins 30 days unless asked otherwise), and its user lists
 * and revokes it, over the real API and with the real `svc tokens`.
 */
describe.each(databaseKinds("pglite"))("every token expires; its user lists and revokes it (%s)", (kind) => {
  const DAY_MS = 86_400_000;
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let other: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;

  const as = (token: string) => ({
    get: (path: string) => call(api.url, "GET", path, { token }),
    post: (path: string, body?: unknown) => call(api.url, "POST", path, { token, body }),
    delete: (path: string) => call(api.url, "DELETE", path, { token }),
  });
  /** Days from now to an ISO instant, to the nearest hundredth. */
  const daysLeft = (iso: string) => Math.round(((Date.parse(iso) - Date.now()) / DAY_MS) * 100) / 100;
  const cli = (token: string) => ({ ...cliHome().env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: token });

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    user = await seedUser(api.services, "owner");
    other = await seedUser(api.services, "other");
    projectId = (await as(user.token).post("/v1/projects", { name: "Expiring" })).body.id;
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("mints every token with an expiry: 30 days unless asked, at most 365", async () => {
    const plain = await as(user.token).post("/v1/accounts/tokens", { name: "laptop" });
    expect(plain.status).toBe(201);
    expect(daysLeft(plain.body.expires_at)).toBeCloseTo(30, 1);
    const week = await as(user.token).post("/v1/accounts/tokens", { expires_in_days: 7 });
    expect(daysLeft(week.body.expires_at)).toBeCloseTo(7, 1);
    const year = await as(user.token).post("/v1/accounts/tokens", { expires_in_days: 365 });
    expect(daysLeft(year.body.expires_at)).toBeCloseTo(365, 1);
    const tooLong = await as(user.token).post("/v1/accounts/tokens", { expires_in_days: 366 });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toMatchObject({ code: "VALIDATION_FAILED", field: "expires_in_days" });
    const projectToken = await as(user.token).post(`/v1/projects/${projectId}/cli-token`);
    expect(daysLeft(projectToken.body.expires_at)).toBeCloseTo(30, 1);
    // A session's token, as provisioning mints it through the orchestrator's port, expires too.
    const session = await api.services.tokens.mint({ userId: user.userId, projectId, name: "session x" });
    expect(daysLeft(session.expires_at)).toBeCloseTo(30, 1);
  });

  it("an expired token is refused with TOKEN_EXPIRED", async () => {
    const minted = (await as(user.token).post("/v1/accounts/tokens", { name: "short" })).body;
    await db.sql.query("update tokens set expires_at = now() - interval '1 second' where id = $1", [minted.id]);
    const refused = await as(minted.token).get("/v1/accounts/me");
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("TOKEN_EXPIRED");
  });

  it("lists the user's own working tokens without secrets, newest first; not to a project token", async () => {
    const minted = (await as(user.token).post("/v1/accounts/tokens", { name: "listed" })).body;
    const theirs = (await as(other.token).post("/v1/accounts/tokens", { name: "theirs" })).body;
    const revoked = (await as(user.token).post("/v1/accounts/tokens", { name: "gone" })).body;
    await api.services.tokens.revoke(revoked.id);

    const listed = await as(user.token).get("/v1/accounts/tokens");
    expect(listed.status).toBe(200);
    const { tokens } = listed.body as { tokens: Record<string, unknown>[] };
    const ids = tokens.map((t) => t.id);
    expect(ids[0]).toBe(minted.id);
    expect(tokens.map((t) => t.name)).toContain("test");
    expect(ids).not.toContain(theirs.id);
    expect(ids).not.toContain(revoked.id);
    // Expired ones (the previous test's) are not listed either.
    expect(tokens.map((t) => t.name)).not.toContain("short");
    for (const token of tokens) {
      expect(Object.keys(token).sort()).toEqual(
        [
          "created_at",
          "expires_at",
          "id",
          "kind",
          "last_used_at",
          "name",
          "prefix",
          "project_id",
          "session_id",
          "user_id",
        ].sort(),
      );
      expect(token.expires_at).toEqual(expect.any(String));
      expect(token.user_id).toBe(user.userId);
    }
    expect(JSON.stringify(listed.body)).not.toContain(minted.token);
    expect(tokens.find((t) => t.id === minted.id)).toMatchObject({
      name: "listed",
      kind: "user",
      project_id: null,
      prefix: `${minted.token.slice(0, 12)}…`,
    });

    const projectToken = (await as(user.token).post(`/v1/projects/${projectId}/cli-token`)).body;
    expect((await as(user.token).get("/v1/accounts/tokens")).body.tokens[0]).toMatchObject({
      id: projectToken.id,
      kind: "project",
      project_id: projectId,
    });
    const byProjectToken = await as(projectToken.token).get("/v1/accounts/tokens");
    expect(byProjectToken.status).toBe(403);
    expect(byProjectToken.body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");
  });

  it("revokes one of the user's own tokens at once; another user's is not found and keeps working", async () => {
    const mine = (await as(user.token).post("/v1/accounts/tokens", { name: "to revoke" })).body;
    expect((await as(mine.token).get("/v1/accounts/me")).status).toBe(200);
    const revoked = await as(user.token).delete(`/v1/accounts/tokens/${mine.id}`);
    expect(revoked.status).toBe(204);
    expect((await as(mine.token).get("/v1/accounts/me")).status).toBe(401);
    const ids = (await as(user.token).get("/v1/accounts/tokens")).body.tokens.map((t: { id: string }) => t.id);
    expect(ids).not.toContain(mine.id);
    const again = await as(user.token).delete(`/v1/accounts/tokens/${mine.id}`);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe("TOKEN_NOT_FOUND");

    const theirs = (await as(other.token).post("/v1/accounts/tokens", { name: "not yours" })).body;
    // Answered as an id that does not exist at all.
    const foreign = await as(user.token).delete(`/v1/accounts/tokens/${theirs.id}`);
    const unknown = await as(user.token).delete(`/v1/accounts/tokens/${randomUUID()}`);
    expect([foreign.status, foreign.body.code]).toEqual([404, "TOKEN_NOT_FOUND"]);
    expect([unknown.status, unknown.body.code]).toEqual([404, "TOKEN_NOT_FOUND"]);
    expect((await as(theirs.token).get("/v1/accounts/me")).status).toBe(200);
    const malformed = await as(user.token).delete("/v1/accounts/tokens/not-a-token-id");
    expect(malformed.status).toBe(400);
    expect(malformed.body.field).toBe("tokenId");
  });

  it("svc tokens ls lists them (table and --json), svc tokens revoke ends one", async () => {
    const minted = (await as(user.token).post("/v1/accounts/tokens", { name: "cli listed" })).body;
    const json = await svc(["tokens", "ls", "--json"], { env: cli(user.token) });
    expect(json.code, json.stderr).toBe(0);
    const listed = JSON.parse(json.stdout) as { id: string; expires_at: string }[];
    expect(listed.find((t) => t.id === minted.id)).toMatchObject({ name: "cli listed", expires_at: minted.expires_at });
    const table = await svc(["tokens"], { env: cli(user.token) });
    expect(table.code, table.stderr).toBe(0);
    const row = table.stdout.split("\n").find((line) => line.startsWith(minted.id));
    expect(row?.split("\t")).toEqual([minted.id, "cli listed", "user", minted.prefix, "-", "never", minted.expires_at]);
    expect(table.stdout).not.toContain(minted.token);

    const revoke = await svc(["tokens", "revoke", minted.id], { env: cli(user.token) });
    expect(revoke.code, revoke.stderr).toBe(0);
    expect(revoke.stdout).toBe("");
    expect(revoke.stderr).toContain(`revoked token ${minted.id}`);
    expect((await as(minted.token).get("/v1/accounts/me")).status).toBe(401);
    const twice = await svc(["tokens", "revoke", minted.id], { env: cli(user.token) });
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain("TOKEN_NOT_FOUND, HTTP 404");
    const bad = await svc(["tokens", "revoke", "nope"], { env: cli(user.token) });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("'nope' is not a token id");
    // A project token reaches no account route: neither the list nor a revocation.
    const projectToken = (await as(user.token).post(`/v1/projects/${projectId}/cli-token`)).body.token;
    const refused = await svc(["tokens", "ls"], { env: cli(projectToken) });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("PROJECT_TOKEN_NOT_ALLOWED");
  });

  it("the self-host admin token expires in a year, renewed by every API start", async () => {
    const secret = newSecret(TOKEN_PREFIX);
    await bootstrapAdmin(api.services, hashSecret(secret));
    const expiry = async () =>
      (
        await db.sql.query<{ expires_at: Date }>("select expires_at from tokens where token_hash = $1", [
          hashSecret(secret),
        ])
      )[0]!.expires_at.toISOString();
    expect(daysLeft(await expiry())).toBeCloseTo(ADMIN_TOKEN_DAYS, 1);
    await db.sql.query("update tokens set expires_at = now() + interval '1 day' where token_hash = $1", [
      hashSecret(secret),
    ]);
    await bootstrapAdmin(api.services, hashSecret(secret));
    expect(daysLeft(await expiry())).toBeCloseTo(ADMIN_TOKEN_DAYS, 1);
    expect((await as(secret).get("/v1/accounts/tokens")).body.tokens[0].expires_at).toBe(await expiry());
  });

  it("migration 0016 gives tokens stored without an expiry 30 days, and no token may lack one after it", async () => {
    const old = await freshDatabase(kind, { migrated: false });
    try {
      const migrations = loadMigrations();
      await migrate(
        old.sql,
        migrations.filter((m) => m.version < 16),
      );
      const [u] = await old.sql.query<{ id: string }>(
        "insert into users (email, name) values ('old@example.test', 'old') returning id",
      );
      await old.sql.query(
        "insert into tokens (user_id, name, token_hash, prefix) values ($1, 'from before', 'h1', 'svc_pat_…')",
        [u!.id],
      );
      expect(await migrate(old.sql, migrations)).toContain(16);
      const [row] = await old.sql.query<{ expires_at: Date }>("select expires_at from tokens where token_hash = 'h1'");
      expect(daysLeft(row!.expires_at.toISOString())).toBeCloseTo(30, 1);
      await expect(
        old.sql.query("insert into tokens (user_id, token_hash, prefix) values ($1, 'h2', 'x')", [u!.id]),
      ).rejects.toThrow(/expires_at/);
    } finally {
      await old.drop();
    }
  });
});
