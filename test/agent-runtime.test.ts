import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freePort } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { containerEnv, orchestratorFor, removeProjectContainers, requireDocker } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";

describe("the real opencode runtime in a sandbox, driven by a scripted model", () => {
  let docker: Docker;
  let db: TestDatabase;
  let api: TestApi;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };

  beforeAll(async () => {
    docker = await requireDocker();
    llm = await startScriptedLlm([
      {
        when: "Add agent.txt",
        steps: [
          {
            tool: "bash",
            args: {
              command:
                "echo from-the-agent > agent.txt && git add agent.txt && git commit -qm 'agent: add agent.txt' && git push -q origin HEAD",
              description: "commit and push",
            },
          },
          { text: "Committed and pushed." },
        ],
      },
      {
        when: "Wait for a long time",
        steps: [
          { tool: "bash", args: { command: "sleep 120", description: "wait", timeout: 300000 } },
          { text: "done waiting" },
        ],
      },
      {
        when: "open a change request",
        steps: [
          {
            tool: "bash",
            args: {
              command: "svc cr open --title 'Agent work' --description 'from the sandbox' && svc cr ls",
              description: "open CR",
            },
          },
          { text: "Opened the change request; over to you." },
        ],
      },
    ]);
    db = await freshDatabase("pglite");
    const port = await freePort();
    api = await startApi(db.sql, {
      host: "0.0.0.0",
      port,
      orchestrator: orchestratorFor(port, { llm: { baseUrl: llm.url, apiKey: "test-key", model: "scripted" } }),
    });
    user = await seedUser(api.services);
    project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Agentic" } })).body;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.commit("initial", { "README.md": "hi\n" });
    expect((await repo.push("main")).code).toBe(0);
  }, 300_000);
  afterAll(async () => {
    await removeProjectContainers(docker, project?.id);
    llm?.close();
    await api?.close();
    await db?.drop();
  });

  /** The project's session, its daemon URL and the service-key header for its control routes. */
  async function sandbox() {
    const [session] = (await call(api.url, "GET", `/v1/projects/${project.id}/sessions`, { token: user.token })).body
      .sessions;
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${session.session_id}`] } });
    const env = await containerEnv(docker, container!.Id);
    return { session, auth: { authorization: `Bearer ${env.SVC_TOKEN}` } };
  }

  it("runs the initial prompt at boot: the agent commits and pushes to its session branch", async () => {
    const created = await call(api.url, "POST", `/v1/projects/${project.id}/sessions`, {
      token: user.token,
      body: { prompt: "Add agent.txt and push it." },
    });
    expect(created.status).toBe(201);
    const id = created.body.session_id;
    const bare = api.services.repos.managedDir(project.id);
    const main = (await git(["rev-parse", "main"], { dir: bare })).stdout.trim();
    let tip = main;
    for (let i = 0; i < 240 && tip === main; i++) {
      await new Promise((r) => setTimeout(r, 500));
      tip = (await git(["rev-parse", "--verify", "-q", id], { dir: bare, okCodes: [1] })).stdout.trim() || main;
    }
    expect(tip).not.toBe(main);
    const { stdout } = await git(["show", "--format=%s", "--name-only", tip], { dir: bare });
    expect(stdout).toContain("agent: add agent.txt");
    expect(stdout).toContain("agent.txt");
    // The model gets the tool's result and closes its turn.
    for (let i = 0; i < 100 && llm.requests() < 2; i++) await new Promise((r) => setTimeout(r, 100));
    expect(llm.requests()).toBeGreaterThanOrEqual(2);
    const session = (await call(api.url, "GET", `/v1/projects/${project.id}/sessions/${id}`, { token: user.token }))
      .body;
    expect(session.status).toBe("running");
  }, 180_000);

  it("delivers a prompt through POST /svc/prompt: the agent opens a CR that a person can merge", async () => {
    const { session, auth } = await sandbox();

    const refused = await fetch(`${session.sandbox_url}/svc/prompt`, {
      method: "POST",
      body: JSON.stringify({ text: "x" }),
    });
    expect(refused.status).toBe(401);
    const prompt = await fetch(`${session.sandbox_url}/svc/prompt`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ text: "Now open a change request for your work." }),
    });
    expect(prompt.status).toBe(200);
    expect((await prompt.json()).session).toMatch(/^ses_/);

    const crs = `/v1/projects/${project.id}/change-requests`;
    let list: { number: number; head_ref: string; origin_session_id: string; title: string }[] = [];
    for (let i = 0; i < 120 && list.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      list = (await call(api.url, "GET", crs, { token: user.token })).body.change_requests;
    }
    expect(list[0]).toMatchObject({
      title: "Agent work",
      head_ref: session.session_id,
      origin_session_id: session.session_id,
    });
    const merged = await call(api.url, "POST", `${crs}/${list[0]!.number}/merge`, { token: user.token });
    expect(merged.status).toBe(200);
    const bare = api.services.repos.managedDir(project.id);
    const { stdout } = await git(["show", "main:agent.txt"], { dir: bare });
    expect(stdout).toBe("from-the-agent\n");
  }, 180_000);

  it("reports a running agent as busy (never idle) and aborts it on POST /svc/abort", async () => {
    const { session, auth } = await sandbox();
    const health = async () => (await (await fetch(`${session.sandbox_url}/svc/health`)).json()) as { busy: boolean };

    await fetch(`${session.sandbox_url}/svc/prompt`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ text: "Wait for a long time." }),
    });
    let busy = false;
    for (let i = 0; i < 60 && !busy; i++) {
      await new Promise((r) => setTimeout(r, 250));
      busy = (await health()).busy;
    }
    expect(busy).toBe(true);

    const aborted = await fetch(`${session.sandbox_url}/svc/abort`, { method: "POST", headers: auth, body: "{}" });
    expect(aborted.status).toBe(200);
    expect((await aborted.json()).aborted.length).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 40 && busy; i++) {
      await new Promise((r) => setTimeout(r, 250));
      busy = (await health()).busy;
    }
    expect(busy).toBe(false);
  }, 120_000);

  it("re-pulls the session branch and restarts the runtime in place on POST /svc/refresh", async () => {
    const { session, auth } = await sandbox();
    // Someone pushes to the session branch from outside the sandbox.
    const outside = await workRepo(authedUrl(project.repo_url, user.token));
    await outside.git(["fetch", "-q", "origin", session.session_id]);
    await outside.checkout("side", { create: true, from: "FETCH_HEAD" });
    const pushed = await outside.commit("from outside", { "outside.txt": "o\n" });
    expect((await outside.push(`HEAD:refs/heads/${session.session_id}`)).code).toBe(0);

    const before = (await (await fetch(`${session.sandbox_url}/svc/health`)).json()).agent.pid;
    const refresh = await fetch(`${session.sandbox_url}/svc/refresh`, { method: "POST", headers: auth, body: "{}" });
    expect(refresh.status).toBe(200);
    expect(await refresh.json()).toEqual({ commit: pushed, restarted: true });
    const health = await (await fetch(`${session.sandbox_url}/svc/health`)).json();
    expect(health.repo.commit).toBe(pushed);
    expect(health.agent.pid).not.toBe(before);
  }, 120_000);
});
