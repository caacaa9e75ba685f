import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";
import { waitFor } from "./support/wait.ts";

/**
 * What a sandbox's workspace holds after the daemon clones it (the real daemon as a local process, the real API's
 * git endpoint): its session branch and base, their history without old file contents, which git fetches through
 * the daemon's credential helper when a command needs one.
 */
const SCRATCH = new URL("../.svc-test/", import.meta.url).pathname;

describe("the sandbox's clone: its branches only, old contents on demand (real daemon, real API)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let daemon: TestDaemon | undefined;
  let workspace: string;
  let helperEnv: Record<string, string>;
  const versions: string[] = [];

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    const user = await seedUser(api.services);
    const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "History" } }))
      .body;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    for (let i = 0; i < 12; i++) {
      versions.push(randomBytes(20_000).toString("hex"));
      await repo.commit(`version ${i}`, { "big.txt": `${versions[i]}\n` });
    }
    await repo.pushed("main");
    await repo.checkout("other", { create: true });
    await repo.commit("elsewhere", { "other.txt": "not for this session\n" });
    await repo.git(["tag", "v1"]);
    await repo.pushed("other", "v1");
    await repo.checkout("main");

    const sandbox = await seedLiveSandbox(db.sql, user, project.id);
    await repo.pushed(`main:refs/heads/${sandbox.sessionId}`);
    // Inside the checkout: the credential helper is this daemon run by `node --import tsx` in the workspace, which
    // finds tsx from there (in a sandbox it is the bundle).
    mkdirSync(SCRATCH, { recursive: true });
    workspace = mkdtempSync(join(SCRATCH, "clone-"));
    // What the daemon's environment holds in a sandbox, where its credential helper runs.
    helperEnv = {
      SVC_TOKEN: sandbox.serviceKey,
      SVC_API_URL: `${api.url}/v1`,
      SVC_PROJECT_ID: project.id,
      SVC_REPO_URL: project.repo_url,
    };
    daemon = await startDaemon({
      serviceKey: sandbox.serviceKey,
      sessionId: sandbox.sessionId,
      agentCommand: ["sleep", "600"],
      stdio: "ignore",
      env: {
        ...helperEnv,
        SVC_PROJECT_AUTO_CLONE: "1",
        SVC_BRANCH_NAME: sandbox.sessionId,
        SVC_BASE_REF: "main",
        SVC_WORKSPACE: workspace,
      },
    });
    await waitFor("the daemon's clone", async () => existsSync(join(workspace, "big.txt")), { timeoutMs: 30_000 });
    await waitFor(
      "the base branch fetched",
      async () => (await gitIn(["for-each-ref", "refs/remotes/origin/main"])).stdout.length > 0,
      { timeoutMs: 10_000 },
    );
  }, 120_000);
  afterAll(async () => {
    daemon?.child.kill("SIGKILL");
    if (workspace) rmSync(workspace, { recursive: true, force: true });
    await api?.close();
    await db?.drop();
  });

  const gitIn = (args: string[]) =>
    execa("git", ["-C", workspace, ...args], { env: { ...helperEnv, GIT_TERMINAL_PROMPT: "0" }, reject: false });

  it("holds the session branch and its base, no other branch and no tag", async () => {
    const refs = (await gitIn(["for-each-ref", "--format=%(refname)"])).stdout.split("\n").sort();
    expect(refs.filter((r) => r.startsWith("refs/remotes/origin/") && !r.endsWith("/HEAD"))).toHaveLength(2);
    expect(refs).toContain("refs/remotes/origin/main");
    expect(refs.some((r) => r.includes("other"))).toBe(false);
    expect(refs.some((r) => r.startsWith("refs/tags/"))).toBe(false);
  });

  it("leaves old file contents on the server until a command needs them, then fetches them through the helper", async () => {
    const missing = (await gitIn(["rev-list", "--objects", "--all", "--missing=print"])).stdout
      .split("\n")
      .filter((l) => l.startsWith("?"));
    // Eleven old versions of big.txt (each 40 kB) were not downloaded; the checked-out one was.
    expect(missing).toHaveLength(versions.length - 1);
    const oldest = await gitIn(["show", "HEAD~11:big.txt"]);
    expect(oldest.exitCode, oldest.stderr).toBe(0);
    expect(oldest.stdout.trim()).toBe(versions[0]);
  });
});
