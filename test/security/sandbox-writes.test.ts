import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import type { Project } from "../../protocol/project.ts";
import { call } from "../support/api-server.ts";
import { execIn, removeProjectContainers } from "../support/docker.ts";
import { type GitServer, hostedRepository } from "../support/git-server.ts";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";

const REMOTE_TOKEN = "ghp_neverInASandbox42";

/**
 * What an agent can write, tried from inside real sandboxes with the agent's own commands (`docker exec`, as its
 * shell tool runs them): a managed repository, and an external one on a private git host that only the project's
 * GIT_ACCESS_TOKEN opens.
 */
describe("an agent's writes from inside a real sandbox", () => {
  let stack: SandboxedProject;
  let server: GitServer;
  let origin: string;
  let external: Project;

  const managedTip = async (branch: string) =>
    (
      await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], {
        dir: stack.api.services.repos.managedDir(stack.project.id),
        okCodes: [1],
      })
    ).stdout.trim();
  const originTip = async (branch: string) =>
    (await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], { dir: origin, okCodes: [1] })).stdout.trim();

  async function runningSession(projectId: string, body: Record<string, unknown> = {}) {
    const path = `/v1/projects/${projectId}/sessions`;
    const created = await call(stack.api.url, "POST", path, { token: stack.user.token, body });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.session_id as string;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { body: session } = await call(stack.api.url, "GET", `${path}/${id}`, { token: stack.user.token });
      if (session.status === "running") break;
      if (session.status === "failed" || Date.now() > deadline)
        throw new Error(`session ${id} is ${session.status}: ${session.error}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const [container] = await stack.docker.listContainers({ filters: { label: [`dev.svc.session=${id}`] } });
    const sh = (script: string) => execIn(stack.docker, container!.Id, ["sh", "-c", script]);
    return { id, containerId: container!.Id, sh };
  }

  beforeAll(async () => {
    stack = await startSandboxedProject("Writes");
    // A person's branch beside main, which no agent may touch.
    const dir = stack.api.services.repos.managedDir(stack.project.id);
    await git(["update-ref", "refs/heads/people/alice", "refs/heads/main"], { dir });

    const hosted = await hostedRepository("private.git", { defaultBranch: "trunk", token: REMOTE_TOKEN });
    ({ server, origin } = hosted);
    await hosted.dev.commit("initial", { "README.md": "upstream\n" });
    await hosted.dev.pushed("trunk", "trunk:refs/heads/people/bob");
    external = (
      await call(stack.api.url, "POST", "/v1/projects", {
        token: stack.user.token,
        body: { name: "Private upstream", repo_url: `${server.url}/private.git`, default_branch: "trunk" },
      })
    ).body;
    const secrets = await call(stack.api.url, "PUT", `/v1/projects/${external.id}/secrets`, {
      token: stack.user.token,
      body: { secrets: { GIT_ACCESS_TOKEN: REMOTE_TOKEN, VISIBLE: "yes" } },
    });
    expect(secrets.status).toBe(200);
  }, 300_000);
  afterAll(async () => {
    await server?.close();
    // The stack removes its own project's containers; the external project's sandbox goes here.
    if (stack) await removeProjectContainers(stack.docker, external?.id);
    await stack?.close();
  });

  it("on a managed repository: its session branch, forward, and nothing else", async () => {
    const session = await runningSession(stack.project.id);
    const main = await managedTip("main");
    const alice = await managedTip("people/alice");
    const work = await session.sh("echo 1 > a.txt && git add a.txt && git commit -qm one && git push -q origin HEAD");
    expect(work.code, work.out).toBe(0);
    const pushed = await managedTip(session.id);
    expect(pushed).not.toBe(main);

    for (const [script, message] of [
      ["git push origin HEAD:main", /main changes only by merging a change request/],
      ["git push --force origin HEAD:main", /main changes only by merging a change request/],
      ["git push origin :main", /main changes only by merging a change request/],
      ["git push --force origin HEAD:people/alice", /a sandbox pushes only its session branch/],
      ["git push origin :people/alice", /a sandbox pushes only its session branch/],
      ["git push origin HEAD:refs/heads/new-branch", /a sandbox pushes only its session branch/],
      ["git tag v1 && git push origin v1", /a sandbox pushes only its session branch/],
      [`git push origin :${session.id}`, /cannot be deleted/],
      ["git commit -q --amend -m rewritten && git push --force origin HEAD", /force-push .* refused/],
    ] as const) {
      const refused = await session.sh(script);
      expect(refused.code, script).not.toBe(0);
      expect(refused.out, script).toMatch(message);
    }
    expect(await managedTip("main")).toBe(main);
    expect(await managedTip("people/alice")).toBe(alice);
    expect(await managedTip("new-branch")).toBe("");
    expect(await managedTip(session.id)).toBe(pushed);
  });

  it("on an external repository: origin is the API's endpoint, which relays its session branch with a credential it never holds", async () => {
    const session = await runningSession(external.id);
    const env = await session.sh("env; cat .git/config");
    expect(env.out).not.toContain(REMOTE_TOKEN);
    expect(env.out).not.toMatch(/^GIT_ACCESS_TOKEN=/m);
    expect(env.out).toMatch(/^VISIBLE=yes$/m);
    const remote = (await session.sh("git remote get-url origin")).out.trim();
    expect(remote).toMatch(new RegExp(`/git/${external.id}\\.git$`));
    expect(remote).not.toContain(server.url.replace("http://", ""));

    const work = await session.sh(
      "echo agent > agent.txt && git add agent.txt && git commit -qm agent && git push -q origin HEAD && git rev-parse HEAD",
    );
    expect(work.code, work.out).toBe(0);
    expect(await originTip(session.id)).toBe(work.out.trim().split("\n").at(-1));

    const trunk = await originTip("trunk");
    const bob = await originTip("people/bob");
    for (const script of [
      "git push origin HEAD:trunk",
      "git push --force origin HEAD:trunk",
      "git push --force origin HEAD:people/bob",
      "git push origin HEAD:refs/heads/elsewhere",
      "git commit -q --amend -m rewritten && git push --force origin HEAD",
    ]) {
      const refused = await session.sh(script);
      expect(refused.code, script).not.toBe(0);
      expect(refused.out, script).toMatch(/svc: /);
    }
    expect(await originTip("trunk")).toBe(trunk);
    expect(await originTip("people/bob")).toBe(bob);
    expect(await originTip("elsewhere")).toBe("");
  });

  it("refuses a session cut from a case variant of the default branch (400), and a trigger's too", async () => {
    const sessions = `/v1/projects/${stack.project.id}/sessions`;
    await git(["update-ref", "refs/heads/Main", "refs/heads/main"], {
      dir: stack.api.services.repos.managedDir(stack.project.id),
    });
    const refused = await call(stack.api.url, "POST", sessions, {
      token: stack.user.token,
      body: { base_ref: "Main" },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: "VALIDATION_FAILED", field: "base_ref" });
    expect(refused.body.error).toMatch(/only in case/);

    // A manifest trigger naming such a base: firing it is refused the same way, and starts nothing.
    const dir = stack.api.services.repos.managedDir(stack.project.id);
    const manifest = '[[triggers]]\nslug = "odd"\nschedule = "0 3 * * *"\nprompt = "x"\nbase_ref = "Main"\n';
    const blob = (await git(["hash-object", "-w", "--stdin"], { dir, input: manifest })).stdout.trim();
    const tree = (await git(["mktree"], { dir, input: `100644 blob ${blob}\tsvc.toml\n` })).stdout.trim();
    const env = { GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@t", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@t" };
    const commit = (await git(["commit-tree", tree, "-p", "refs/heads/main", "-m", "manifest"], { dir, env })).stdout;
    await git(["update-ref", "refs/heads/main", commit.trim()], { dir });
    stack.api.services.repos.invalidate({ ...stack.project, repo_kind: "managed" });
    const before = (await call(stack.api.url, "GET", sessions, { token: stack.user.token })).body.sessions.length;
    const fired = await call(stack.api.url, "POST", `/v1/projects/${stack.project.id}/triggers/odd/fire`, {
      token: stack.user.token,
    });
    expect(fired.status, JSON.stringify(fired.body)).toBe(400);
    expect(fired.body.field).toBe("base_ref");
    expect((await call(stack.api.url, "GET", sessions, { token: stack.user.token })).body.sessions).toHaveLength(
      before,
    );
  });
});
