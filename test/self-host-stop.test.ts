import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser } from "./support/api-server.ts";
import { cliHome, freePort, shipNewApp, svc } from "./support/cli.ts";
import { BASE_IMAGE, removeProjectContainers, requireDocker } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { waitFor } from "./support/wait.ts";

const containersOf = (docker: Docker, session: string) =>
  docker.listContainers({ all: true, filters: { label: [`dev.svc.session=${session}`] } });

/** Another stack's sandbox on the same engine: labelled as one, with an installation id that is not ours. */
async function foreignSandbox(docker: Docker): Promise<Docker.Container> {
  const container = await docker.createContainer({
    Image: BASE_IMAGE,
    Cmd: ["sleep", "600"],
    Labels: {
      "dev.svc.installation": randomUUID(),
      "dev.svc.sandbox": randomUUID(),
      "dev.svc.session": randomUUID(),
      "dev.svc.project": randomUUID(),
    },
  });
  await container.start();
  return container;
}

describe("svc self-host stop --sandboxes touches only its own stack's (real CLI, real Docker)", () => {
  const home = cliHome();
  const app = join(home.dir, "app");
  let docker: Docker;
  let project: string | undefined;
  let foreign: Docker.Container | undefined;
  const run = (args: string[]) => svc(args, { env: home.env, cwd: app });

  beforeAll(async () => {
    docker = await requireDocker();
    const port = await freePort();
    const start = await svc(["self-host", "start", "--port", String(port)], { env: home.env });
    expect(start.code, start.stderr).toBe(0);
    project = await shipNewApp(app, run);
  }, 300_000);
  afterAll(async () => {
    await svc(["self-host", "stop"], { env: home.env });
    await foreign?.remove({ force: true }).catch(() => {});
    await removeProjectContainers(docker, project);
  });

  it("stops this stack's running session and leaves another installation's sandbox running", async () => {
    const created = await run(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    expect(await containersOf(docker, id)).toHaveLength(1);
    foreign = await foreignSandbox(docker);

    const stop = await svc(["self-host", "stop", "--sandboxes", "--json"], { env: home.env });
    expect(stop.code, stop.stderr).toBe(0);
    expect(JSON.parse(stop.stdout)).toMatchObject({ stopped: true, mode: "embedded", sessions_stopped: 1 });
    expect(await containersOf(docker, id)).toHaveLength(0);
    expect((await foreign.inspect()).State.Running).toBe(true);
  });
});

describe("POST /v1/admin/sessions/stop (the installation's administrator, every account)", () => {
  let sp: SandboxedProject;

  beforeAll(async () => {
    sp = await startSandboxedProject("Admin stop");
  }, 300_000);
  afterAll(async () => {
    await sp?.close();
  });

  it("stops every account's live sessions for the admin only; a member's token gets 403", async () => {
    const bob = await seedUser(sp.api.services, "bob");
    const bobs = (await call(sp.api.url, "POST", "/v1/projects", { token: bob.token, body: { name: "Bob's" } })).body;
    const repo = await workRepo(authedUrl(bobs.repo_url, bob.token));
    await repo.commit("initial", { "README.md": "bob\n" });
    await repo.pushed("main");
    const admin = await sp.api.services.accounts.createUserWithAccount({
      email: `root-${randomUUID()}@example.test`,
      name: "root",
      accountSlug: `root-${randomUUID().slice(0, 8)}`,
      isAdmin: true,
    });
    const adminToken = (await sp.api.services.tokens.mint({ userId: admin.userId, name: "admin" })).token;

    const bobsSessions = (suffix = "", method = "GET") =>
      call(sp.api.url, method, `/v1/projects/${bobs.id}/sessions${suffix}`, {
        token: bob.token,
        body: method === "POST" ? {} : undefined,
      });
    const alices = (await sp.sessions("", "POST", {})).body.session_id;
    const bobsSession = (await bobsSessions("", "POST")).body.session_id;
    for (const [sessions, id] of [
      [sp.sessions, alices],
      [bobsSessions, bobsSession],
    ] as const) {
      const session = await waitFor(
        "the session to start",
        async () => {
          const { body } = await sessions(`/${id}`);
          return body.status !== "provisioning" && body;
        },
        { timeoutMs: 120_000 },
      );
      expect(session.status, session.error).toBe("running");
    }

    const refused = await call(sp.api.url, "POST", "/v1/admin/sessions/stop", { token: bob.token });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("FORBIDDEN");

    const stopped = await call(sp.api.url, "POST", "/v1/admin/sessions/stop", { token: adminToken });
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);
    expect(new Set(stopped.body.stopped)).toEqual(new Set([alices, bobsSession]));
    expect((await sp.sessions(`/${alices}`)).body.status).toBe("stopped");
    expect(await containersOf(sp.docker, alices)).toHaveLength(0);
    expect(await containersOf(sp.docker, bobsSession)).toHaveLength(0);
    await removeProjectContainers(sp.docker, bobs.id);
  }, 300_000);
});
