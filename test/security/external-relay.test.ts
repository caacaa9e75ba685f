import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import type { Project } from "../../protocol/project.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "../support/git-fixture.ts";
import { type GitServer, hostedRepository } from "../support/git-server.ts";
import { seedLiveSandbox, sessionClone } from "../support/sandbox-rows.ts";

const REMOTE_TOKEN = "ghp_relay0nlyFORtheAPI";

/**
 * An external repository through the API's git endpoint, as a sandbox uses it: a private remote on real smart
 * HTTP that only the project's GIT_ACCESS_TOKEN opens, and sandbox credentials that never carry that token.
 */
describe("the git relay of an external repository", () => {
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let server: GitServer;
  let origin: string;
  let dev: WorkRepo;
  let project: Project;
  let sessionId: string;
  let relayUrl: string;
  let sandboxCredential: { username: string; password: string };

  const originTip = async (branch: string) =>
    (await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], { dir: origin, okCodes: [1] })).stdout.trim();

  const sandboxClone = () =>
    sessionClone(authedUrl(relayUrl, sandboxCredential.password, sandboxCredential.username), sessionId);

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    alice = await seedUser(api.services, "alice");
    ({ server, origin, dev } = await hostedRepository("private.git", { defaultBranch: "trunk", token: REMOTE_TOKEN }));
    await dev.commit("initial", { "app.txt": "v1\n" });
    await dev.pushed("trunk", "trunk:refs/heads/people/bob");
    project = (
      await call(api.url, "POST", "/v1/projects", {
        token: alice.token,
        body: { name: "Private upstream", repo_url: `${server.url}/private.git`, default_branch: "trunk" },
      })
    ).body;
    const secrets = await call(api.url, "PUT", `/v1/projects/${project.id}/secrets`, {
      token: alice.token,
      body: { secrets: { GIT_ACCESS_TOKEN: REMOTE_TOKEN } },
    });
    expect(secrets.status).toBe(200);

    // A session as the orchestrator makes one: its branch cut on the remote, a sandbox with a service key.
    const live = await seedLiveSandbox(db.sql, alice, project.id, { baseRef: "trunk" });
    sessionId = live.sessionId;
    const serviceKey = live.serviceKey;
    await api.services.repos.open(project, 0);
    expect(await api.services.repos.createBranch(project, sessionId, await originTip("trunk"))).toBe(true);
    const cred = await call(api.url, "GET", `/v1/projects/${project.id}/git/clone-credential`, { token: serviceKey });
    expect(cred.status).toBe(200);
    relayUrl = cred.body.repo_url;
    sandboxCredential = cred.body;
  });
  afterAll(async () => {
    await api?.close();
    await server?.close();
    await db?.drop();
  });

  it("points a sandbox at the API's endpoint, never at the remote, and gives it no credential for the remote", () => {
    expect(relayUrl).toBe(`${api.url}/git/${project.id}.git`);
    expect(JSON.stringify(sandboxCredential)).not.toContain(REMOTE_TOKEN);
    expect(sandboxCredential.password).toMatch(/^svc_git_/);
  });

  it("serves fetches from the remote and relays the session branch's pushes to it", async () => {
    const sandbox = await sandboxClone();
    expect(await sandbox.sha(`origin/${sessionId}`)).toBe(await originTip("trunk"));
    const work = await sandbox.commit("agent work", { "agent.txt": "1\n" });
    const pushed = await sandbox.push(`HEAD:refs/heads/${sessionId}`);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(await originTip(sessionId)).toBe(work);

    // A commit that reached the remote some other way is what the next fetch sees.
    await dev.git(["fetch", "-q", "origin"]);
    await dev.checkout("trunk");
    const moved = await dev.commit("trunk moves on the host", { "host.txt": "h\n" });
    await dev.pushed("trunk");
    await sandbox.git(["fetch", "-q", "origin"]);
    expect(await sandbox.sha("origin/trunk")).toBe(moved);
  });

  it("refuses every other write of a sandbox and leaves the remote as it was", async () => {
    const sandbox = await sandboxClone();
    const mine = await originTip(sessionId);
    const trunk = await originTip("trunk");
    const bob = await originTip("people/bob");
    await sandbox.commit("sneaky", { "sneaky.txt": "1\n" });
    const rewrite = (await sandbox.git(["commit-tree", "HEAD^{tree}", "-m", "rewritten"])).stdout.trim();
    for (const refspec of [
      // Forced, so that git sends them whatever the client thinks of the remote's tips.
      "+HEAD:refs/heads/trunk",
      "+HEAD:refs/heads/people/bob",
      "HEAD:refs/heads/new-branch",
      "HEAD:refs/tags/v1",
      `+${rewrite}:refs/heads/${sessionId}`,
      ":refs/heads/people/bob",
      `:refs/heads/${sessionId}`,
    ]) {
      const pushed = await sandbox.push(refspec);
      expect(pushed.code, refspec).not.toBe(0);
      expect(pushed.stderr, refspec).toMatch(/svc: /);
    }
    expect(await originTip(sessionId)).toBe(mine);
    expect(await originTip("trunk")).toBe(trunk);
    expect(await originTip("people/bob")).toBe(bob);
    expect(await originTip("new-branch")).toBe("");
  });

  it("refuses the push when the remote does, and the mirror never holds what the remote refused", async () => {
    const sandbox = await sandboxClone();
    // Someone moves the session branch on the host: the sandbox's push is no longer a fast-forward there.
    await dev.git(["fetch", "-q", "origin"]);
    await dev.checkout("host-side", { create: true, from: `origin/${sessionId}` });
    const theirs = await dev.commit("pushed on the host", { "theirs.txt": "t\n" });
    await dev.pushed(`HEAD:refs/heads/${sessionId}`);

    const ours = await sandbox.commit("ours", { "ours.txt": "o\n" });
    const pushed = await sandbox.push(`HEAD:refs/heads/${sessionId}`);
    expect(pushed.code).not.toBe(0);
    expect(pushed.stderr).toMatch(/svc: the project's repository refused the push/);
    expect(await originTip(sessionId)).toBe(theirs);
    const mirror = api.services.repos.dirOf(project);
    expect((await git(["rev-parse", `refs/heads/${sessionId}`], { dir: mirror })).stdout.trim()).not.toBe(ours);
  });

  it("lets people fetch through the endpoint but not push there: they push to the remote themselves", async () => {
    const person = await workRepo(authedUrl(relayUrl, alice.token));
    expect((await person.git(["fetch", "-q", "origin"], { reject: false })).code).toBe(0);
    await person.checkout("mine", { create: true, from: "origin/trunk" });
    await person.commit("by hand");
    const pushed = await person.push("HEAD:refs/heads/alice/topic");
    expect(pushed.code).not.toBe(0);
    expect(pushed.stderr).toMatch(/push there yourself/);
    expect(await originTip("alice/topic")).toBe("");
  });
});
