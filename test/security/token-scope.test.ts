import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "../support/api-server.ts";
import { type CliEnv, svc } from "../support/cli.ts";
import { containerEnv, execIn } from "../support/docker.ts";
import { previewFetch } from "../support/preview-fetch.ts";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";

/**
 * Issue 26, item 2, the attack from outside: with its own SVC_CLI_TOKEN, one session read, prompted and stopped its
 * siblings. Two real sessions of one project (Docker, the sandbox image), the real API and the real CLI, run on the
 * host and inside the sandbox: a session's token reaches its own session only, starts none and mints nothing.
 */
describe("a session's token acts on its own session only (real sandboxes)", () => {
  let sp: SandboxedProject;
  /** The session whose token is used, and its sibling in the same project. */
  let own: string;
  let sibling: string;
  let token: string;
  let containerId: string;

  const session = (sid: string, suffix = "") => `/v1/projects/${sp.project.id}/sessions/${sid}${suffix}`;
  const as = (secret: string, method: string, path: string, body?: unknown) =>
    call(sp.api.url, method, path, { token: secret, body });
  const statusOf = async (sid: string) => (await sp.sessions(`/${sid}`)).body.status as string;
  const agentCli = (): CliEnv => ({ ...sp.cliEnv, SVC_CLI_TOKEN: token });

  async function running(): Promise<string> {
    const created = await sp.sessions("", "POST", {});
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const sid = created.body.session_id as string;
    for (let waited = 0; (await statusOf(sid)) === "provisioning"; waited += 500) {
      if (waited > 120_000) throw new Error(`session ${sid} still provisioning after 2 minutes`);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(await statusOf(sid)).toBe("running");
    return sid;
  }

  beforeAll(async () => {
    sp = await startSandboxedProject("Scoped", { sessionCap: 3 });
    [own, sibling] = await Promise.all([running(), running()]);
    const [container] = await sp.docker.listContainers({ filters: { label: [`dev.svc.session=${own}`] } });
    containerId = container!.Id;
    token = (await containerEnv(sp.docker, containerId)).SVC_CLI_TOKEN!;
    expect(token).toMatch(/^svc_pat_/);
  }, 300_000);
  afterAll(async () => {
    await sp?.close();
  });

  it("every route of a sibling session answers 403 SESSION_SCOPE and changes nothing", async () => {
    const unknown = "00000000-0000-4000-8000-000000000000";
    const attempts: [string, string, unknown?][] = [
      ["GET", session(sibling)],
      ["GET", `/v1/sessions/${sibling}`],
      ["POST", session(sibling, "/messages"), { text: "stop what you are doing" }],
      ["POST", session(sibling, "/abort")],
      ["GET", session(sibling, "/events")],
      ["GET", session(sibling, "/logs")],
      ["POST", session(sibling, "/previews"), { port: 3000 }],
      ["POST", session(sibling, "/stop")],
      ["POST", session(sibling, "/restart")],
      ["DELETE", session(sibling)],
      // An id that exists nowhere gets the same answer: the comparison comes before any lookup.
      ["GET", session(unknown)],
      ["GET", `/v1/sessions/${unknown}`],
    ];
    for (const [method, path, body] of attempts) {
      const res = await as(token, method, path, body);
      expect([res.status, res.body?.code], `${method} ${path}`).toEqual([403, "SESSION_SCOPE"]);
    }
    // Nor its sibling's preview host, with the token as a bearer.
    const siblingPreview = await previewFetch(`http://3000-${sibling}.localhost:${new URL(sp.api.url).port}/`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect([siblingPreview.status, ((await siblingPreview.json()) as { code: string }).code]).toEqual([
      403,
      "SESSION_SCOPE",
    ]);
    expect(await statusOf(sibling)).toBe("running");
    const [sibContainer] = await sp.docker.listContainers({ filters: { label: [`dev.svc.session=${sibling}`] } });
    expect(sibContainer?.State).toBe("running");
  });

  it("the CLI in the sandbox lists only its own session and cannot stop, exec in or read its sibling", async () => {
    const inside = (cmd: string) => execIn(sp.docker, containerId, ["sh", "-c", cmd]);
    const listed = await inside("svc sessions ls --json 2>/dev/null");
    expect(listed.code, listed.out).toBe(0);
    expect(JSON.parse(listed.out)).toEqual([expect.objectContaining({ session_id: own, status: "running" })]);
    const stop = await inside(`svc sessions stop ${sibling} 2>&1`);
    expect(stop.code).toBe(1);
    expect(stop.out).toContain("a session's token acts on its own session only (SESSION_SCOPE, HTTP 403)");

    // From the host with the same token: exec (an upgrade, not a route) and logs are refused the same way.
    const exec = await svc(["sessions", "exec", sibling, "--", "touch", "/workspace/pwned"], { env: agentCli() });
    expect(exec.code).toBe(1);
    expect(exec.stderr).toContain("(SESSION_SCOPE, HTTP 403)");
    const logs = await svc(["sessions", "logs", sibling], { env: agentCli() });
    expect(logs.code).toBe(1);
    expect(logs.stderr).toContain("(SESSION_SCOPE, HTTP 403)");
    const looked = await svc(["sessions", "exec", sibling, "--", "ls", "/workspace"], { env: sp.cliEnv });
    expect(looked.code, looked.stderr).toBe(0);
    expect(looked.stdout).not.toContain("pwned");
    expect(await statusOf(sibling)).toBe("running");
  });

  it("starts no session, fires no trigger and mints no token; its clone credential still works", async () => {
    const before = (await sp.sessions("")).body.sessions.length;
    const create = await as(token, "POST", `/v1/projects/${sp.project.id}/sessions`, {});
    expect([create.status, create.body.code]).toEqual([403, "SESSION_SCOPE"]);
    const fire = await as(token, "POST", `/v1/projects/${sp.project.id}/triggers/nightly/fire`);
    expect([fire.status, fire.body.code]).toEqual([403, "SESSION_SCOPE"]);
    expect((await sp.sessions("")).body.sessions).toHaveLength(before);

    for (const [method, path, body] of [
      ["POST", `/v1/projects/${sp.project.id}/cli-token`, {}],
      ["POST", "/v1/accounts/tokens", {}],
      ["GET", "/v1/accounts/tokens", undefined],
      ["POST", "/v1/dashboard/sign-in-links", { next: "/dashboard" }],
    ] as const) {
      const res = await as(token, method, path, body);
      expect([res.status, res.body.code], path).toEqual([403, "PROJECT_TOKEN_NOT_ALLOWED"]);
    }
    // Its own sandbox's git keeps working: a clone credential bound to that sandbox.
    const credential = await as(token, "GET", `/v1/projects/${sp.project.id}/git/clone-credential`);
    expect(credential.status).toBe(200);
    expect(credential.body.password).toMatch(/^svc_git_/);
  });

  it("on its own session the token still works: read, list, preview, and stop itself last", async () => {
    expect((await as(token, "GET", session(own))).body).toMatchObject({ session_id: own, status: "running" });
    expect((await as(token, "GET", `/v1/sessions/${own}`)).status).toBe(200);
    const listed = await as(token, "GET", `/v1/projects/${sp.project.id}/sessions`);
    expect(listed.body.sessions.map((s: { session_id: string }) => s.session_id)).toEqual([own]);
    // A person's token still sees both.
    expect((await sp.sessions("")).body.sessions).toHaveLength(2);
    expect((await as(token, "POST", session(own, "/previews"), { port: 3000 })).status).toBe(201);
    const stopped = await as(token, "POST", session(own, "/stop"));
    expect(stopped.status).toBe(200);
    expect(stopped.body.status).toBe("stopped");
    expect(await statusOf(sibling)).toBe("running");
  }, 60_000);
});
