import { randomUUID } from "node:crypto";
import { request } from "node:http";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { SERVICE_KEY_PREFIX } from "../protocol/token.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";

describe("managed repositories over git smart HTTP", () => {
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let bob: Awaited<ReturnType<typeof seedUser>>;
  let projectA: { id: string; repo_url: string };
  let projectB: { id: string; repo_url: string };
  let projectToken: string;
  let serviceKey: string;
  let sessionId: string;
  let mainTip: string;

  const tip = async (projectId: string, branch: string) =>
    (
      await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], {
        dir: api.services.repos.managedDir(projectId),
        okCodes: [1],
      })
    ).stdout.trim();

  async function cloneWith(url: string) {
    const repo = await workRepo(url);
    const fetched = await repo.git(["fetch", "-q", "origin"], { reject: false });
    return { repo, ok: fetched.code === 0, stderr: fetched.stderr };
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    alice = await seedUser(api.services, "alice");
    bob = await seedUser(api.services, "bob");
    projectA = (await call(api.url, "POST", "/v1/projects", { token: alice.token, body: { name: "Repo A" } })).body;
    projectB = (await call(api.url, "POST", "/v1/projects", { token: alice.token, body: { name: "Repo B" } })).body;
    expect(projectA.repo_url).toBe(`${api.url}/git/${projectA.id}.git`);
    projectToken = (await call(api.url, "POST", `/v1/projects/${projectA.id}/cli-token`, { token: alice.token })).body
      .token;

    const owner = await workRepo(authedUrl(projectA.repo_url, alice.token));
    mainTip = await owner.commit("initial", { "README.md": "hello\n" });
    const pushed = await owner.push("main");
    expect(pushed.code, pushed.stderr).toBe(0);

    serviceKey = newSecret(SERVICE_KEY_PREFIX);
    sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, $1, 'main', 'build', $4)`,
      [sessionId, alice.accountId, projectA.id, alice.userId],
    );
    await db.sql.query(
      "insert into session_sandboxes (session_id, project_id, status, service_key_hash) values ($1, $2, 'active', $3)",
      [sessionId, projectA.id, hashSecret(serviceKey)],
    );
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("serves clone and push with a user token; main, once created, moves only by a CR merge", async () => {
    const { repo, ok } = await cloneWith(authedUrl(projectA.repo_url, alice.token));
    expect(ok).toBe(true);
    expect(await repo.sha("origin/main")).toBe(mainTip);
    await repo.checkout("main", { create: true, from: "origin/main" });
    await repo.commit("owner ships", { "ship.txt": "1\n" });
    const forward = await repo.push("main");
    expect(forward.code).not.toBe(0);
    expect(forward.stderr).toMatch(/main changes only by merging a change request.*svc cr open/);
    const rewritten = (await repo.git(["commit-tree", "HEAD^{tree}", "-m", "history rewritten"])).stdout.trim();
    const force = await repo.git(["push", "-q", "--force", "origin", `${rewritten}:refs/heads/main`], {
      reject: false,
    });
    expect(force.code).not.toBe(0);
    const del = await repo.git(["push", "-q", "origin", ":main"], { reject: false });
    expect(del.code).not.toBe(0);
    expect(await tip(projectA.id, "main")).toBe(mainTip);

    // The same commits land on a branch of the person's own, which git treats as usual (a rewrite included).
    await repo.pushed("main:refs/heads/alice/ship");
    await repo.git(["commit", "-q", "--amend", "-m", "owner ships, reworded"]);
    expect((await repo.git(["push", "-q", "--force", "origin", "main:alice/ship"], { reject: false })).code).toBe(0);
    expect(await tip(projectA.id, "alice/ship")).toBe(await repo.sha("HEAD"));
  });

  it("lets a project token a person minted push branches, as that person, but never main", async () => {
    const { repo, ok } = await cloneWith(authedUrl(projectA.repo_url, projectToken));
    expect(ok).toBe(true);
    await repo.checkout("script-1", { create: true, from: "origin/main" });
    const first = await repo.commit("script work", { "script.txt": "1\n" });
    await repo.pushed("HEAD:refs/heads/script-1");
    expect(await tip(projectA.id, "script-1")).toBe(first);

    const toMain = await repo.push("HEAD:refs/heads/main");
    expect(toMain.code).not.toBe(0);
    expect(toMain.stderr).toMatch(/only by merging a change request/);
    expect(await tip(projectA.id, "main")).toBe(mainTip);
  });

  it("hands out short-lived clone credentials to users and to the sandbox service key", async () => {
    for (const [i, token] of [alice.token, serviceKey, projectToken].entries()) {
      const res = await call(api.url, "GET", `/v1/projects/${projectA.id}/git/clone-credential`, { token });
      expect(res.status).toBe(200);
      expect(res.body.password).toMatch(/^svc_git_/);
      expect(res.body.repo_url).toBe(projectA.repo_url);
      const ttl = new Date(res.body.expires_at).getTime() - Date.now();
      expect(ttl).toBeGreaterThan(60_000);
      expect(ttl).toBeLessThanOrEqual(15 * 60_000);

      const { repo, ok } = await cloneWith(authedUrl(res.body.repo_url, res.body.password, res.body.username));
      expect(ok).toBe(true);
      await repo.checkout(`cred-${i}`, { create: true, from: "origin/main" });
      await repo.commit("via credential");
      // A credential the sandbox's service key got pushes that sandbox's session branch and nothing else.
      const branch = token === serviceKey ? sessionId : `cred-${i}`;
      await repo.pushed(`HEAD:refs/heads/${branch}`);
      expect((await repo.push("HEAD:refs/heads/main")).code).not.toBe(0);
      // The credential is for git only, and only for its project.
      expect((await call(api.url, "GET", `/v1/projects/${projectA.id}`, { token: res.body.password })).status).toBe(
        401,
      );
      expect((await cloneWith(authedUrl(projectB.repo_url, res.body.password))).ok).toBe(false);
    }
    const other = await call(api.url, "GET", `/v1/projects/${projectB.id}/git/clone-credential`, { token: serviceKey });
    expect(other.status).toBe(403);
    expect(
      (await call(api.url, "GET", `/v1/projects/${projectA.id}/git/clone-credential`, { token: bob.token })).status,
    ).toBe(403);
  });

  it("refuses an expired clone credential", async () => {
    const res = await call(api.url, "GET", `/v1/projects/${projectA.id}/git/clone-credential`, { token: alice.token });
    await db.sql.query("update clone_credentials set expires_at = now() - interval '1 second'");
    const { ok } = await cloneWith(authedUrl(projectA.repo_url, res.body.password));
    expect(ok).toBe(false);
  });

  it("refuses other projects, other accounts, the bare service key and anonymous access", async () => {
    expect((await cloneWith(authedUrl(projectB.repo_url, projectToken))).ok).toBe(false);
    expect((await cloneWith(authedUrl(projectA.repo_url, bob.token))).ok).toBe(false);
    expect((await cloneWith(authedUrl(projectA.repo_url, serviceKey))).ok).toBe(false);
    expect((await cloneWith(projectA.repo_url)).ok).toBe(false);

    const anonymous = await fetch(`${projectA.repo_url}/info/refs?service=git-upload-pack`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Basic/);
    const wrong = await fetch(`${projectB.repo_url}/info/refs?service=git-upload-pack`, {
      headers: { authorization: `Bearer ${projectToken}` },
    });
    expect(wrong.status).toBe(403);
  });

  it("serves only the smart protocol endpoints of a validated repository path", async () => {
    const headers = { authorization: `Bearer ${alice.token}` };
    // Raw requests: fetch() would normalize the dot segments away before they reach the server.
    const rawStatus = (path: string) =>
      new Promise<number>((resolve, reject) => {
        const { hostname, port } = new URL(api.url);
        request({ hostname, port, path, headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
          .on("error", reject)
          .end();
      });
    for (const path of [
      `/git/${projectA.id}.git/HEAD`,
      `/git/${projectA.id}.git/config`,
      `/git/${projectA.id}.git/objects/info/packs`,
      `/git/${projectA.id}.git/../${projectB.id}.git/info/refs?service=git-upload-pack`,
      `/git/${projectA.id}.git/info/../../../${projectB.id}.git/info/refs?service=git-upload-pack`,
      "/git/..%2F..%2Fetc/info/refs?service=git-upload-pack",
      "/git/not-a-project.git/info/refs?service=git-upload-pack",
    ]) {
      expect(await rawStatus(path), path).toBe(404);
    }
  });

  it("accepts gzip-compressed upload-pack requests", async () => {
    const want = `want ${mainTip}\n`;
    const pkt = (s: string) => (s.length + 4).toString(16).padStart(4, "0") + s;
    const body = gzipSync(Buffer.from(`${pkt(want)}0000${pkt("done\n")}`));
    const res = await fetch(`${projectA.repo_url}/git-upload-pack`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${alice.token}`,
        "content-type": "application/x-git-upload-pack-request",
        "content-encoding": "gzip",
      },
      body,
    });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).includes(Buffer.from("PACK"))).toBe(true);
  });
});
