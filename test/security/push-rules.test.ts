import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "../support/git-fixture.ts";
import { seedLiveSandbox, sessionClone } from "../support/sandbox-rows.ts";

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

  const cloned = (url: string) => sessionClone(url, sessionId);

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    alice = await seedUser(api.services, "alice");
    project = (await call(api.url, "POST", "/v1/projects", { token: alice.token, body: { name: "Rules" } })).body;
    owner = await workRepo(authedUrl(project.repo_url, alice.token));
    await owner.commit("initial", { "README.md": "hello\n" });
    await owner.pushed("main", "main:refs/heads/other");

    // A session as the orchestrator makes one: its branch cut from main, a sandbox with a service key and the
    // session's own project token.
    const live = await seedLiveSandbox(db.sql, alice, project.id, { tokens: api.services.tokens });
    ({ sessionId, serviceKey } = live);
    sessionToken = live.sessionToken!;
    await owner.pushed(`main:refs/heads/${sessionId}`);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("lets a sandbox push only its session branch, forward: no other branch, tag, namespace, deletion or rewrite", async () => {
    const sandbox = await sandboxRepo();
    const first = await sandbox.commit("agent work", { "agent.txt": "1\n" });
    await sandbox.pushed(`HEAD:refs/heads/${sessionId}`);
    const second = await sandbox.commit("more", { "agent.txt": "2\n" });
    await sandbox.pushed(`HEAD:refs/heads/${sessionId}`);
    expect(await ref(`refs/heads/${sessionId}`)).toBe(second);

    await sandbox.git(["tag", "v1"]);
    await sandbox.git(["tag", "-a", "v1-annotated", "-m", "release"]);
    for (const [refspec, target] of [
      ["HEAD:refs/heads/feature-1", "refs/heads/feature-1"],
      ["HEAD:refs/heads/other", "refs/heads/other"],
      ["HEAD:refs/heads/main", "refs/heads/main"],
      ["v1", "refs/tags/v1"],
      ["v1-annotated", "refs/tags/v1-annotated"],
      ["HEAD:refs/svc/x", "refs/svc/x"],
      ["HEAD:refs/notes/commits", "refs/notes/commits"],
      ["HEAD:refs/pull/1/head", "refs/pull/1/head"],
      [`+${first}:refs/heads/${sessionId}`, `refs/heads/${sessionId}`],
      [":refs/heads/other", "refs/heads/other"],
      [":refs/heads/main", "refs/heads/main"],
      [`:refs/heads/${sessionId}`, `refs/heads/${sessionId}`],
    ] as const) {
      const before = await ref(target);
      const pushed = await sandbox.push(refspec);
      expect(pushed.code, refspec).not.toBe(0);
      expect(pushed.stderr, refspec).toMatch(
        /svc: (a sandbox pushes only its session branch|main changes only by merging|force-push|the session branch .* cannot be deleted|refs\/svc\/x is refused: refs\/svc\/ is written by svc alone)/,
      );
      expect(await ref(target), refspec).toBe(before);
    }
    const elsewhere = await sandbox.push("HEAD:refs/heads/feature-1");
    expect(elsewhere.stderr).toContain(`a sandbox pushes only its session branch (${sessionId}): git push origin HEAD`);
    // One refused ref refuses the whole push: the session branch beside it is not written either.
    await sandbox.commit("third", { "agent.txt": "3\n" });
    expect((await sandbox.push(`HEAD:refs/heads/${sessionId}`, "HEAD:refs/heads/with-it")).code).not.toBe(0);
    expect(await ref(`refs/heads/${sessionId}`)).toBe(second);
  });

  it("treats the session's project token as that sandbox, and a credential of a person as that person", async () => {
    const sandbox = await cloned(authedUrl(project.repo_url, sessionToken));
    const mine = await sandbox.commit("via token", { "token.txt": "1\n" });
    await sandbox.pushed(`HEAD:refs/heads/${sessionId}`);
    expect(await ref(`refs/heads/${sessionId}`)).toBe(mine);
    expect((await sandbox.push("HEAD:refs/heads/token-branch")).code).not.toBe(0);
    expect((await sandbox.push(":refs/heads/other")).code).not.toBe(0);
    expect(await ref("refs/heads/token-branch")).toBe("");
    expect(await ref("refs/heads/other")).not.toBe("");

    // A person's credential (no sandbox behind it): their own branches and tags, as git allows; main never.
    const cred = await call(api.url, "GET", `/v1/projects/${project.id}/git/clone-credential`, { token: alice.token });
    const person = await cloned(authedUrl(project.repo_url, cred.body.password, cred.body.username));
    const theirs = await person.commit("by hand", { "hand.txt": "1\n" });
    await person.git(["tag", "hand-v1"]);
    await person.pushed("HEAD:refs/heads/alice/topic", "hand-v1");
    expect(await ref("refs/heads/alice/topic")).toBe(theirs);
    expect(await ref("refs/tags/hand-v1")).not.toBe("");
    await person.pushed(":refs/heads/alice/topic");
    const toMain = await person.push("HEAD:refs/heads/main");
    expect(toMain.code).not.toBe(0);
    expect(toMain.stderr).toMatch(/svc cr open/);
  });

  it("refuses HEAD and case variants of the default branch as branch names, for everyone", async () => {
    const mainTip = await ref("refs/heads/main");
    for (const name of ["Main", "MAIN", "mAin"]) {
      const pushed = await owner.push(`main:refs/heads/${name}`);
      expect(pushed.code, name).not.toBe(0);
      expect(pushed.stderr, name).toMatch(/case variants of main are not branch names/);
      expect(await ref(`refs/heads/${name}`), name).toBe("");
    }
    const head = await owner.push("main:refs/heads/HEAD");
    expect(head.code).not.toBe(0);
    expect(await ref("refs/heads/HEAD")).toBe("");
    expect(await ref("refs/heads/main")).toBe(mainTip);
  });

  it("lets the first push create the default branch, and only a person's", async () => {
    const fresh = (await call(api.url, "POST", "/v1/projects", { token: alice.token, body: { name: "Fresh" } })).body;
    const { sessionToken: token } = await seedLiveSandbox(db.sql, alice, fresh.id, { tokens: api.services.tokens });
    const agent = await workRepo(authedUrl(fresh.repo_url, token!));
    await agent.commit("agent's main");
    expect((await agent.push("main")).code).not.toBe(0);

    const person = await workRepo(authedUrl(fresh.repo_url, alice.token));
    const first = await person.commit("first ship");
    await person.pushed("main");
    const dir = api.services.repos.managedDir(fresh.id);
    expect((await git(["rev-parse", "refs/heads/main"], { dir })).stdout.trim()).toBe(first);
  });
});
