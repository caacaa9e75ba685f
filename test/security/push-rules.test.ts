import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "../support/git-fixture.ts";

/** What a sandbox may push into a managed repository, with real git over smart HTTP and the real pre-receive hook. */
describe("sandbox push rules (managed repositories)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };
  let owner: WorkRepo;
  let sessionId: string;
  let serviceKey: string;
  let sessionToken: string;

  const ref = async (name: string) =>
    (
      await git(["rev-parse", "--verify", "-q", name], { dir: api.services.repos.managedDir(project.id), okCodes: [1] })
    ).stdout.trim();

  /** A working copy pushing with a clone credential minted for the sandbox's service key, as the daemon's helper does. */
  async function sandboxRepo(): Promise<WorkRepo> {
    const cred = await call(api.url, "GET", `/v1/projects/${project.id}/git/clone-credential`, { token: serviceKey });
    expect(cred.status).toBe(200);
    return cloned(authedUrl(cred.body.repo_url, cred.body.password, cred.body.username));
  }

  async function cloned(url: string): Promise<WorkRepo> {
    const repo = await workRepo(url);
    await repo.git(["fetch", "-q", "origin"]);
    await repo.checkout("work", { create: true, from: `origin/${sessionId}` });
    return repo;
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    alice = await seedUser(api.services, "alice");
    project = (await call(api.url, "POST", "/v1/projects", { token: alice.token, body: { name: "Rules" } })).body;
    owner = await workRepo(authedUrl(project.repo_url, alice.token));
    await owner.commit("initial", { "README.md": "hello\n" });
    expect((await owner.push("main", "main:refs/heads/other")).code).toBe(0);

    // A session as the orchestrator makes one: its branch cut from main, a sandbox with a service key and the
    // session's own project token.
    sessionId = randomUUID();
    expect((await owner.push(`main:refs/heads/${sessionId}`)).code).toBe(0);
    serviceKey = newSecret(SERVICE_KEY_PREFIX);
    const token = await api.services.tokens.mint({
      userId: alice.userId,
      projectId: project.id,
      name: `session ${sessionId}`,
    });
    sessionToken = token.token;
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, $1, 'main', 'build', $4)`,
      [sessionId, alice.accountId, project.id, alice.userId],
    );
    await db.sql.query(
      `insert into session_sandboxes (session_id, project_id, status, service_key_hash, token_id)
       values ($1, $2, 'active', $3, $4)`,
      [sessionId, project.id, hashSecret(serviceKey), token.id],
    );
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("refuses tags and every ref outside refs/heads from a sandbox; a person still pushes tags", async () => {
    const sandbox = await sandboxRepo();
    await sandbox.commit("agent work", { "agent.txt": "1\n" });
    await sandbox.git(["tag", "v1"]);
    await sandbox.git(["tag", "-a", "v1-annotated", "-m", "release"]);
    for (const [refspec, refused] of [
      ["v1", "refs/tags/v1"],
      ["v1-annotated", "refs/tags/v1-annotated"],
      ["HEAD:refs/svc/x", "refs/svc/x"],
      ["HEAD:refs/svc/merges/1", "refs/svc/merges/1"],
      ["HEAD:refs/notes/commits", "refs/notes/commits"],
      ["HEAD:refs/pull/1/head", "refs/pull/1/head"],
    ] as const) {
      const pushed = await sandbox.push(refspec);
      expect(pushed.code, refspec).not.toBe(0);
      expect(pushed.stderr, refspec).toMatch(/svc: sandboxes (cannot push tags|push branches only)/);
      expect(await ref(refused), refspec).toBe("");
    }
    // One refused ref refuses the whole push: the branch beside it is not written either.
    const mixed = await sandbox.push("HEAD:refs/heads/with-tag", "v1");
    expect(mixed.code).not.toBe(0);
    expect(await ref("refs/heads/with-tag")).toBe("");

    await owner.git(["tag", "owner-v1"]);
    expect((await owner.push("owner-v1")).code).toBe(0);
    expect(await ref("refs/tags/owner-v1")).not.toBe("");
  });

  it("lets a sandbox create and fast-forward branches, and delete its own session branch but no other", async () => {
    const sandbox = await sandboxRepo();
    const first = await sandbox.commit("feature", { "feature.txt": "1\n" });
    expect((await sandbox.push("HEAD:refs/heads/feature-1")).code).toBe(0);
    const second = await sandbox.commit("more", { "feature.txt": "2\n" });
    expect((await sandbox.push("HEAD:refs/heads/feature-1")).code).toBe(0);
    expect(await ref("refs/heads/feature-1")).toBe(second);
    expect((await sandbox.push(`HEAD:refs/heads/${sessionId}`)).code).toBe(0);
    expect(await ref(`refs/heads/${sessionId}`)).toBe(second);

    // Never the default branch, never a rewrite.
    const toMain = await sandbox.push("HEAD:refs/heads/main");
    expect(toMain.code).not.toBe(0);
    expect(toMain.stderr).toMatch(/only by merging a change request/);
    const force = await sandbox.push(`+${first}:refs/heads/feature-1`);
    expect(force.code).not.toBe(0);
    expect(force.stderr).toMatch(/force-push to refs\/heads\/feature-1 refused/);
    expect(await ref("refs/heads/feature-1")).toBe(second);

    // Deleting: another branch (the owner's or one the sandbox made) no; the default branch no; its own yes.
    for (const branch of ["other", "feature-1", "main"]) {
      const del = await sandbox.push(`:refs/heads/${branch}`);
      expect(del.code, branch).not.toBe(0);
      expect(await ref(`refs/heads/${branch}`), branch).not.toBe("");
    }
    const own = await sandbox.push(`:refs/heads/${sessionId}`);
    expect(own.code, own.stderr).toBe(0);
    expect(await ref(`refs/heads/${sessionId}`)).toBe("");
    expect((await owner.push(`main:refs/heads/${sessionId}`)).code).toBe(0);
  });

  it("treats the session's project token as that sandbox: its own branch only, no tags", async () => {
    const sandbox = await cloned(authedUrl(project.repo_url, sessionToken));
    await sandbox.commit("via token", { "token.txt": "1\n" });
    await sandbox.git(["tag", "t1"]);
    expect((await sandbox.push("t1")).code).not.toBe(0);
    expect(await ref("refs/tags/t1")).toBe("");
    expect((await sandbox.push(":refs/heads/other")).code).not.toBe(0);
    const own = await sandbox.push(`:refs/heads/${sessionId}`);
    expect(own.code, own.stderr).toBe(0);
    expect(await ref(`refs/heads/${sessionId}`)).toBe("");
    expect((await owner.push(`main:refs/heads/${sessionId}`)).code).toBe(0);

    // A credential of a user (no session behind it) deletes nothing.
    const cred = await call(api.url, "GET", `/v1/projects/${project.id}/git/clone-credential`, { token: alice.token });
    const userCred = await cloned(authedUrl(project.repo_url, cred.body.password, cred.body.username));
    expect((await userCred.push(`:refs/heads/${sessionId}`)).code).not.toBe(0);
    expect(await ref(`refs/heads/${sessionId}`)).not.toBe("");
  });
});
