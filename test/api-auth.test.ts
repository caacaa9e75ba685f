import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { SERVICE_KEY_PREFIX } from "../protocol/token.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";

describe.each(databaseKinds("pglite"))("token model over HTTP (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let bob: Awaited<ReturnType<typeof seedUser>>;
  let aliceProject: string;
  let aliceOther: string;
  let bobProject: string;
  let projectToken: string;
  let serviceKey: string;

  const get = (path: string, token?: string) => call(api.url, "GET", path, { token });
  const post = (path: string, token?: string, body?: unknown) => call(api.url, "POST", path, { token, body });

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    alice = await seedUser(api.services, "alice");
    bob = await seedUser(api.services, "bob");
    aliceProject = (await post("/v1/projects", alice.token, { name: "Alpha" })).body.id;
    aliceOther = (await post("/v1/projects", alice.token, { name: "Beta" })).body.id;
    bobProject = (await post("/v1/projects", bob.token, { name: "Gamma" })).body.id;
    const minted = await post(`/v1/projects/${aliceProject}/cli-token`, alice.token, { name: "sandbox" });
    expect(minted.status).toBe(201);
    projectToken = minted.body.token;

    // A live sandbox of Alice's project, holding its service key (SVC_TOKEN).
    serviceKey = newSecret(SERVICE_KEY_PREFIX);
    const sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, $1, 'main', 'build', $4)`,
      [sessionId, alice.accountId, aliceProject, alice.userId],
    );
    await db.sql.query(
      "insert into session_sandboxes (session_id, project_id, status, service_key_hash) values ($1, $2, 'active', $3)",
      [sessionId, aliceProject, hashSecret(serviceKey)],
    );
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("answers health without a token", async () => {
    const res = await get("/v1/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ok", database: kind });
  });

  it("rejects missing, malformed, unknown and revoked tokens with 401", async () => {
    for (const path of ["/v1/accounts/me", `/v1/projects/${aliceProject}`, "/v1/projects"]) {
      const none = await get(path);
      expect(none.status, path).toBe(401);
      expect(none.body.code).toBe("UNAUTHENTICATED");
    }
    for (const header of ["Token abc", "Bearer", "Bearer a b", `Basic ${alice.token}`]) {
      const res = await call(api.url, "GET", "/v1/accounts/me", { headers: { authorization: header } });
      expect(res.status, header).toBe(401);
    }
    expect((await get("/v1/accounts/me", "svc_pat_not-a-real-token")).status).toBe(401);
    expect((await get("/v1/accounts/me", "ghp_somethingelse")).status).toBe(401);

    const minted = await post("/v1/accounts/tokens", alice.token, { name: "to revoke" });
    expect((await get("/v1/accounts/me", minted.body.token)).status).toBe(200);
    await api.services.tokens.revoke(minted.body.id);
    expect((await get("/v1/accounts/me", minted.body.token)).status).toBe(401);
  });

  it("rejects an expired token with 401 TOKEN_EXPIRED", async () => {
    const minted = await post("/v1/accounts/tokens", alice.token, { expires_in_days: 1 });
    // Expire it in the database before its first use (lookups are cached for a few seconds).
    await db.sql.query("update tokens set expires_at = now() - interval '1 second' where id = $1", [minted.body.id]);
    const res = await get("/v1/accounts/me", minted.body.token);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("TOKEN_EXPIRED");
  });

  it("lets a user token reach account routes and its own accounts' projects only", async () => {
    const me = await get("/v1/accounts/me", alice.token);
    expect(me.status).toBe(200);
    expect(me.body.user.id).toBe(alice.userId);
    expect(me.body.account.id).toBe(alice.accountId);

    expect((await get(`/v1/projects/${aliceProject}`, alice.token)).status).toBe(200);
    expect((await get("/v1/projects/alpha", alice.token)).body.id).toBe(aliceProject);

    const foreign = await get(`/v1/projects/${bobProject}`, alice.token);
    expect(foreign.status).toBe(403);
    expect(foreign.body.code).toBe("NOT_A_MEMBER");
    expect((await get("/v1/projects/gamma", alice.token)).status).toBe(404);
    expect((await get(`/v1/projects/${randomUUID()}`, alice.token)).status).toBe(404);

    const list = await get("/v1/projects", alice.token);
    expect(list.body.projects.map((p: { id: string }) => p.id).sort()).toEqual([aliceProject, aliceOther].sort());

    const minted = await post("/v1/accounts/tokens", alice.token, { name: "laptop" });
    expect(minted.status).toBe(201);
    expect(minted.body.token).toMatch(/^svc_pat_/);
    expect(minted.body.kind).toBe("user");
    expect((await get("/v1/accounts/me", minted.body.token)).body.user.id).toBe(alice.userId);
  });

  it("scopes a project token to its own project (SPEC rules 1 and 2)", async () => {
    const own = await get(`/v1/projects/${aliceProject}`, projectToken);
    expect(own.status).toBe(200);
    expect(own.body.id).toBe(aliceProject);

    for (const other of [aliceOther, bobProject, randomUUID(), "beta"]) {
      const res = await get(`/v1/projects/${other}`, projectToken);
      expect(res.status, other).toBe(403);
      expect(res.body.code).toBe("TOKEN_PROJECT_MISMATCH");
    }
    const again = await post(`/v1/projects/${aliceOther}/cli-token`, projectToken);
    expect(again.status).toBe(403);

    for (const path of ["/v1/accounts/me", "/v1/accounts/tokens"]) {
      const res = path.endsWith("me") ? await get(path, projectToken) : await post(path, projectToken, {});
      expect(res.status, path).toBe(403);
      expect(res.body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");
    }
    const list = await get("/v1/projects", projectToken);
    expect(list.status).toBe(200);
    expect(list.body.projects.map((p: { id: string }) => p.id)).toEqual([aliceProject]);
    expect((await post("/v1/projects", projectToken, { name: "Sneaky" })).status).toBe(403);

    // A project token mints no further tokens (issue 10): only its user does.
    const fresh = await post(`/v1/projects/${aliceProject}/cli-token`, projectToken);
    expect(fresh.status).toBe(403);
    expect(fresh.body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");
    const minted = await post(`/v1/projects/${aliceProject}/cli-token`, alice.token);
    expect(minted.status).toBe(201);
    expect(minted.body).toMatchObject({ kind: "project", project_id: aliceProject, user_id: alice.userId });
  });

  it("refuses the sandbox service key on project and account routes (SPEC rule 5)", async () => {
    const project = await get(`/v1/projects/${aliceProject}`, serviceKey);
    expect(project.status).toBe(403);
    expect(project.body.code).toBe("SERVICE_KEY_NOT_ALLOWED");
    expect((await get("/v1/accounts/me", serviceKey)).status).toBe(403);
    expect((await get("/v1/projects", serviceKey)).status).toBe(403);
    expect((await get(`/v1/projects/${aliceProject}`, `${serviceKey}x`)).status).toBe(401);
  });

  it("never stores a token in clear", async () => {
    const rows = await db.sql.query<{ token_hash: string; prefix: string }>("select token_hash, prefix from tokens");
    const all = JSON.stringify(rows);
    for (const secret of [alice.token, bob.token, projectToken]) expect(all).not.toContain(secret);
    expect(rows.some((r) => r.token_hash === hashSecret(alice.token))).toBe(true);
  });
});
