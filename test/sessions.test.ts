import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { joinCluster } from "../orchestrator/cluster.ts";
import { createIdleSweeper } from "../orchestrator/idle-sweeper.ts";
import { createReconciler } from "../orchestrator/reconciler.ts";
import { createDockerDriver } from "../orchestrator/sandbox/docker-driver.ts";
import { call, type seedUser, type TestApi } from "./support/api-server.ts";
import type { TestDatabase } from "./support/databases.ts";
import { execIn } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";

describe("sessions on real Docker", () => {
  let docker: Docker;
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };

  let sandboxed: SandboxedProject;
  const sessions = (suffix = "", method = "GET", body?: unknown) => sandboxed.sessions(suffix, method, body);

  async function waitStatus(id: string, statuses: string[], timeoutMs = 120_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await sessions(`/${id}`);
      if (statuses.includes(res.body.status)) return res.body;
      if (Date.now() > deadline) throw new Error(`session ${id} stuck in ${res.body.status}: ${res.body.error}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async function containerOf(sessionId: string) {
    const list = await docker.listContainers({ all: true, filters: { label: [`dev.svc.session=${sessionId}`] } });
    return list;
  }

  const exec = (containerId: string, cmd: string[], env: string[] = []) => execIn(docker, containerId, cmd, { env });

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Sandboxed");
    ({ docker, db, api, user, project } = sandboxed);
    await call(api.url, "PUT", `/v1/projects/${project.id}/secrets`, {
      token: user.token,
      body: { secrets: { API_SECRET: "s3cr3t-value", OTHER: "x" } },
    });
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
  });

  it("creates a session: branch cut, container running with SPEC's env, daemon healthy", async () => {
    const created = await sessions("", "POST", {});
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: "provisioning", base_ref: "main" });
    expect(created.body.branch).toBe(created.body.session_id);
    const session = await waitStatus(created.body.session_id, ["running", "failed"]);
    expect(session.error).toBeNull();
    expect(session.status).toBe("running");

    const bare = api.services.repos.managedDir(project.id);
    const main = (await git(["rev-parse", "main"], { dir: bare })).stdout.trim();
    expect((await git(["rev-parse", session.session_id], { dir: bare })).stdout.trim()).toBe(main);

    const [container] = await containerOf(session.session_id);
    expect(container!.State).toBe("running");
    const inspect = await docker.getContainer(container!.Id).inspect();
    const env = Object.fromEntries(
      inspect.Config.Env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
    );
    expect(env).toMatchObject({
      SVC_PROJECT_ID: project.id,
      SVC_SESSION_ID: session.session_id,
      SVC_BRANCH_NAME: session.session_id,
      SVC_DEFAULT_BRANCH: "main",
      SVC_BASE_REF: "main",
      SVC_SERVICE_PORT: "8000",
      SVC_PROJECT_AUTO_CLONE: "1",
      SVC_PROJECT_SECRET_NAMES: "API_SECRET,OTHER",
      API_SECRET: "s3cr3t-value",
    });
    expect(env.SVC_API_URL).toMatch(/\/v1$/);
    expect(env.SVC_CLI_TOKEN).toBe(env.SVC_EXECUTOR_TOKEN);
    expect(env.SVC_TOKEN).toMatch(/^svc_sk_/);
    expect(env.SVC_BOOTSTRAP_AGENT_SESSION).toBeUndefined();
    expect(Object.keys(env).some((k) => /GIT.*TOKEN|GITHUB_TOKEN/.test(k))).toBe(false);
    expect(inspect.HostConfig.Privileged).toBe(false);
    expect(inspect.HostConfig.CapDrop).toContain("ALL");
    // No port published: the API reaches the daemon over the link it dialed (DESIGN: "Beyond one host").
    expect(inspect.HostConfig.PortBindings ?? {}).toEqual({});
    expect(
      Object.values(inspect.NetworkSettings.Ports ?? {})
        .flat()
        .filter(Boolean),
    ).toEqual([]);
    expect(inspect.HostConfig.Memory).toBeGreaterThan(0);

    const health = await (await fetch(`${session.sandbox_url}/svc/health`)).json();
    expect(health.repo).toMatchObject({ state: "cloned", branch: session.session_id, commit: main });
  });

  it("lets the sandbox push its branch with `git push origin HEAD` and list CRs with its injected token", async () => {
    const list = (await sessions()).body.sessions;
    const session = list.find((s: { status: string }) => s.status === "running");
    const [container] = await containerOf(session.session_id);
    const commit = await exec(container!.Id, [
      "sh",
      "-c",
      "echo agent > agent.txt && git add agent.txt && git commit -qm 'agent work' && git push -q origin HEAD && git rev-parse HEAD",
    ]);
    expect(commit.code, commit.out).toBe(0);
    const bare = api.services.repos.managedDir(project.id);
    expect((await git(["rev-parse", session.session_id], { dir: bare })).stdout.trim()).toBe(
      commit.out.trim().split("\n").at(-1),
    );
    const config = await exec(container!.Id, ["sh", "-c", "cat .git/config; env"]);
    expect(config.out).not.toMatch(/svc_git_/);

    const mainPush = await exec(container!.Id, ["git", "push", "origin", "HEAD:main"]);
    expect(mainPush.code).not.toBe(0);

    const opened = await exec(container!.Id, ["svc", "cr", "open", "--title", "From the sandbox"]);
    expect(opened.code, opened.out).toBe(0);
    const ls = await exec(container!.Id, ["svc", "cr", "ls", "--json"]);
    expect(ls.code, ls.out).toBe(0);
    const crs = JSON.parse(ls.out.slice(ls.out.indexOf("[")));
    expect(crs[0]).toMatchObject({
      head_ref: session.session_id,
      origin_session_id: session.session_id,
      title: "From the sandbox",
    });
  });

  it("svc-entrypoint (PID 1) restarts a dead svc-agent and stops the container promptly on SIGTERM", async () => {
    const session = (await sessions()).body.sessions.find((s: { status: string }) => s.status === "running");
    const [container] = await containerOf(session.session_id);
    const ps = await exec(container!.Id, [
      "sh",
      "-c",
      "cat /proc/1/cmdline | tr '\\0' ' '; echo; pgrep -f svc-agent.mjs",
    ]);
    const [pid1, agentPid] = ps.out.trim().split("\n");
    expect(pid1).toContain("svc-entrypoint");
    await exec(container!.Id, ["kill", "-9", agentPid!.trim()]);
    let health: { uptime_s: number } | undefined;
    for (let i = 0; i < 60 && !health; i++) {
      await new Promise((r) => setTimeout(r, 250));
      health = await fetch(`${session.sandbox_url}/svc/health`)
        .then((r) => (r.ok ? r.json() : undefined))
        .catch(() => undefined);
    }
    expect(health?.uptime_s).toBeLessThan(10);
    const after = await exec(container!.Id, ["pgrep", "-f", "svc-agent.mjs"]);
    expect(after.out.trim()).not.toBe(agentPid!.trim());
  });

  it("caps concurrent sessions per account with 429, even for parallel creates", async () => {
    const results = await Promise.all([1, 2, 3, 4].map(() => sessions("", "POST", {})));
    const statuses = results.map((r) => r.status).sort();
    // One session is already live and the cap is 3: exactly two more fit.
    expect(statuses).toEqual([201, 201, 429, 429]);
    const refused = results.find((r) => r.status === 429)!;
    expect(refused.body).toMatchObject({ limit: 3, current: 3 });
    for (const r of results.filter((r) => r.status === 201)) {
      await sessions(`/${r.body.session_id}`, "DELETE");
    }
  });

  it("restarts with a fresh project token and revokes the old one", async () => {
    const running = (await sessions()).body.sessions.find((s: { status: string }) => s.status === "running");
    const [before] = await containerOf(running.session_id);
    const oldEnv = (await docker.getContainer(before!.Id).inspect()).Config.Env.find((e) =>
      e.startsWith("SVC_CLI_TOKEN="),
    )!.slice(14);
    expect((await call(api.url, "GET", `/v1/projects/${project.id}`, { token: oldEnv })).status).toBe(200);

    const restarted = await sessions(`/${running.session_id}/restart`, "POST");
    expect(restarted.status).toBe(200);
    const session = await waitStatus(running.session_id, ["running", "failed"]);
    expect(session.status).toBe("running");
    const after = await containerOf(running.session_id);
    expect(after).toHaveLength(1);
    expect(after[0]!.Id).not.toBe(before!.Id);
    const newEnv = (await docker.getContainer(after[0]!.Id).inspect()).Config.Env.find((e) =>
      e.startsWith("SVC_CLI_TOKEN="),
    )!.slice(14);
    expect(newEnv).not.toBe(oldEnv);
    expect((await call(api.url, "GET", `/v1/projects/${project.id}`, { token: oldEnv })).status).toBe(401);
    expect((await call(api.url, "GET", `/v1/projects/${project.id}`, { token: newEnv })).status).toBe(200);
  });

  it("stops and removes: container gone, CRs kept with origin_session_id null", async () => {
    const running = (await sessions()).body.sessions.find((s: { status: string }) => s.status === "running");
    const stopped = await sessions(`/${running.session_id}/stop`, "POST");
    expect(stopped.body.status).toBe("stopped");
    expect(await containerOf(running.session_id)).toHaveLength(0);
    // A stopped session's agent and ports answer 409 with the way back, not a 502 from a vanished sandbox.
    for (const [suffix, body] of [
      ["/previews", { port: 3000 }],
      ["/messages", { text: "hi" }],
    ] as const) {
      const refused = await sessions(`/${running.session_id}${suffix}`, "POST", body);
      expect(refused.status, suffix).toBe(409);
      expect(refused.body.error).toContain(`'svc sessions restart ${running.session_id}'`);
    }
    expect((await sessions(`/${running.session_id}`, "DELETE")).status).toBe(204);
    expect((await sessions(`/${running.session_id}`)).status).toBe(404);
    const crs = (await call(api.url, "GET", `/v1/projects/${project.id}/change-requests`, { token: user.token })).body
      .change_requests;
    const fromSandbox = crs.find((c: { title: string }) => c.title === "From the sandbox");
    expect(fromSandbox.origin_session_id).toBeNull();
  });

  it("hibernates idle sandboxes and leaves busy or recent ones alone", async () => {
    const created = (await sessions("", "POST", {})).body;
    await waitStatus(created.session_id, ["running"]);
    const deps = {
      records: api.services.sessionStore,
      provisioner: api.services.orchestrator!.provisioner,
      log: () => {},
    };
    expect(await createIdleSweeper({ ...deps, idleMs: 60_000 })()).toEqual([]);
    await new Promise((r) => setTimeout(r, 50));
    expect(await createIdleSweeper({ ...deps, idleMs: 1 })()).toEqual([created.session_id]);
    expect((await sessions(`/${created.session_id}`)).body.status).toBe("stopped");
    expect(await containerOf(created.session_id)).toHaveLength(0);
    const [sandbox] = await db.sql.query<{ status: string; last_activity_at: Date | null }>(
      "select status, last_activity_at from session_sandboxes where session_id = $1",
      [created.session_id],
    );
    expect(sandbox).toMatchObject({ status: "stopped" });
    expect(sandbox!.last_activity_at).not.toBeNull();
  });

  it("reconciles: removes orphaned containers, closes sandboxes whose container vanished, fails interrupted provisioning", async () => {
    const running = (await sessions("", "POST", {})).body;
    await waitStatus(running.session_id, ["running"]);
    const [container] = await containerOf(running.session_id);
    const image = (await docker.getContainer(container!.Id).inspect()).Config.Image;
    // A container left by a crashed API: our labels, no live sandbox row.
    const orphan = await docker.createContainer({
      Image: image,
      Entrypoint: ["sleep", "300"],
      Labels: {
        "dev.svc.installation": api.services.installationId,
        "dev.svc.sandbox": "00000000-0000-4000-8000-00000000dead",
        "dev.svc.session": "gone",
        "dev.svc.project": project.id,
      },
    });
    await orphan.start();
    // Another svc installation's sandbox on the same engine: not ours to remove.
    const foreign = await docker.createContainer({
      Image: image,
      Entrypoint: ["sleep", "300"],
      Labels: {
        "dev.svc.installation": "00000000-0000-4000-8000-0000000f0e19",
        "dev.svc.sandbox": "x",
        "dev.svc.project": project.id,
      },
    });
    await foreign.start();
    // A session whose provisioning process died.
    const stuck = (
      await db.sql.query<{ session_id: string }>(
        `insert into project_sessions (account_id, project_id, status, branch, base_ref, agent_name, created_by)
       values ($1, $2, 'provisioning', 'x', 'main', 'build', $3) returning session_id`,
        [user.accountId, project.id, user.userId],
      )
    )[0]!;
    // Its process died after creating the container, before recording the container's id.
    const [half] = await db.sql.query<{ sandbox_id: string }>(
      "insert into session_sandboxes (session_id, project_id) values ($1, $2) returning sandbox_id",
      [stuck.session_id, project.id],
    );
    const halfMade = await docker.createContainer({
      Image: image,
      Entrypoint: ["sleep", "300"],
      Labels: {
        "dev.svc.installation": api.services.installationId,
        "dev.svc.sandbox": half!.sandbox_id,
        "dev.svc.session": stuck.session_id,
        "dev.svc.project": project.id,
      },
    });
    await halfMade.start();
    // A running session whose container disappears behind our back.
    await docker.getContainer(container!.Id).remove({ force: true });

    const reconcile = createReconciler({
      driver: createDockerDriver({ servicePort: 8000 }),
      records: api.services.sessionStore,
      provisioner: api.services.orchestrator!.provisioner,
      installationId: api.services.installationId,
      isAlive: (await joinCluster(db.sql, { instanceId: api.services.instanceId })).isAlive,
      log: () => {},
    });
    const result = await reconcile();
    expect(result.removedContainers).toBeGreaterThanOrEqual(1);
    await expect(orphan.inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(halfMade.inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect((await foreign.inspect()).State.Running).toBe(true);
    await foreign.remove({ force: true });
    expect((await sessions(`/${running.session_id}`)).body).toMatchObject({
      status: "failed",
      error: "the sandbox container is gone",
    });
    expect((await sessions(`/${stuck.session_id}`)).body).toMatchObject({
      status: "failed",
      error: "provisioning was interrupted",
    });
    expect(await reconcile()).toEqual({ removedContainers: 0, closedSandboxes: 0, failedSessions: 0 });
  });

  it("starts a session from a branch whose own .svc/Dockerfile does not build: only the default branch's is built", async () => {
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.git(["fetch", "-q", "origin"]);
    await repo.checkout("broken-image", { create: true, from: "origin/main" });
    await repo.commit("bad dockerfile", {
      ".svc/Dockerfile": "ARG SVC_BASE_IMAGE\nFROM $SVC_BASE_IMAGE\nRUN echo building-step && exit 3\n",
    });
    await repo.pushed("broken-image");
    const created = await sessions("", "POST", { base_ref: "broken-image" });
    const session = await waitStatus(created.body.session_id, ["failed", "running"]);
    expect(session.error).toBeNull();
    expect(session.status).toBe("running");
    const [container] = await containerOf(session.session_id);
    expect(container!.Image).not.toMatch(/^svc-project:/);
    expect((await exec(container!.Id, ["cat", ".svc/Dockerfile"])).out).toContain("building-step");
  });

  it("refuses a session whose base branch does not exist with 400, recording no session and starting nothing", async () => {
    const before = (await sessions()).body.sessions.length;
    const refused = await sessions("", "POST", { base_ref: "no-such-branch" });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      code: "BRANCH_NOT_FOUND",
      field: "base_ref",
      error: "branch 'no-such-branch' does not exist",
    });
    expect((await sessions()).body.sessions).toHaveLength(before);
  });
});
