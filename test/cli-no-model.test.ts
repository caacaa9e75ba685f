import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signUserContext, USER_CONTEXT_HEADER } from "../protocol/user-context.ts";
import { call } from "./support/api-server.ts";
import { type CliEnv, svc } from "./support/cli.ts";
import { execIn } from "./support/docker.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { waitFor } from "./support/wait.ts";

const SETUP = "svc self-host env set SVC_LLM_BASE_URL=… SVC_LLM_API_KEY=… SVC_AGENT_MODEL=…";
const PER_PROJECT =
  "svc secrets set SVC_LLM_BASE_URL=… SVC_LLM_API_KEY=… SVC_AGENT_MODEL=… (or OPENAI_API_KEY=… / ANTHROPIC_API_KEY=…)";

/** A stack with no model gateway: svc says so, with the command that fixes it, instead of waiting in silence. */
describe("svc sessions with no model configured", () => {
  let sandboxed: SandboxedProject;
  let env: CliEnv;

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Modelless", { poolSize: 1 });
    env = sandboxed.cliEnv;
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
  });

  it("sessions new warns; chat --prompt fails at once with the env-set line, booting no agent; opencode has no provider", async () => {
    const created = await svc(["sessions", "new"], { env });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toContain(
      `warning: no model is configured: the agent cannot answer until one is; run '${SETUP}', or for this project '${PER_PROJECT}'`,
    );
    const id = created.stdout.trim();

    const started = Date.now();
    const chat = await svc(["sessions", "chat", id, "--prompt", "hello?"], { env });
    expect(chat.code, chat.stderr).toBe(1);
    expect(chat.stderr).toContain(
      `error: no model is configured for this session's agent; run '${SETUP}', restart the stack ` +
        `('svc self-host restart'), then 'svc sessions restart ${id}'; or give this project ` +
        `its own: '${PER_PROJECT}', then restart the session (MODEL_NOT_CONFIGURED, HTTP 503)`,
    );
    // It waits for nothing: no agent is booted for a chat it could not answer.
    expect(Date.now() - started).toBeLessThan(5_000);
    const session = (await sandboxed.sessions(`/${id}`)).body;
    const health = async () => await (await fetch(`${session.sandbox_url}/svc/health`)).json();
    expect(await health()).toMatchObject({ agent: { state: "standby", pid: null }, busy: false });

    // Booted all the same (a request for the runtime itself), it runs with only the svc provider enabled and none
    // defined: it can never fall back to its built-in providers (which retry the internet for a minute first).
    const project = (
      await call(sandboxed.api.url, "GET", `/v1/projects/${sandboxed.project.id}`, { token: sandboxed.user.token })
    ).body;
    const target = await sandboxed.api.services.sessions!.sandboxTarget(project, id);
    const context = signUserContext(target.serviceKey, {
      user_id: sandboxed.user.userId,
      project_id: sandboxed.project.id,
      session_id: id,
      exp: Math.floor(Date.now() / 1000) + 300,
    });
    expect((await fetch(`${target.url}/session`, { headers: { [USER_CONTEXT_HEADER]: context } })).status).toBe(503);
    const running = await waitFor("the runtime booted", async () => {
      const now = await health();
      return now.agent.state === "running" && now;
    });
    expect(running).toMatchObject({ busy: false });
    const [container] = await sandboxed.docker.listContainers({ filters: { label: [`dev.svc.session=${id}`] } });
    const environ = await execIn(sandboxed.docker, container!.Id, ["cat", `/proc/${running.agent.pid}/environ`]);
    const config = environ.out
      .split("\0")
      .find((line) => line.startsWith("OPENCODE_CONFIG_CONTENT="))!
      .slice("OPENCODE_CONFIG_CONTENT=".length);
    expect(JSON.parse(config)).toMatchObject({ enabled_providers: ["svc"] });
    expect(JSON.parse(config)).not.toHaveProperty("provider");
  }, 180_000);

  it("the warm pool's sandbox is ready without booting an agent that no prompt could use", async () => {
    const health = await waitFor("a ready pooled sandbox", async () => {
      const [pooled] = await sandboxed.docker.listContainers({
        filters: { label: [`dev.svc.project=${sandboxed.project.id}`, "dev.svc.pool"] },
      });
      if (!pooled) return undefined;
      const read = await execIn(sandboxed.docker, pooled.Id, [
        "/opt/svc/bin/node",
        "-e",
        "fetch('http://127.0.0.1:8000/svc/health').then((r) => r.text()).then(console.log)",
      ]);
      const now = read.code === 0 ? JSON.parse(read.out) : undefined;
      return now?.pool === "ready" && now;
    });
    expect(health.agent).toMatchObject({ state: "standby", pid: null });
  }, 120_000);

  it("a session started with a prompt boots no agent for it: the sandbox says the prompt was not sent", async () => {
    const created = await svc(["sessions", "new", "--prompt", "add a README"], { env });
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const session = (await sandboxed.sessions(`/${id}`)).body;
    const lines = await waitFor("the daemon's word on the prompt", async () => {
      const logs = await svc(["sessions", "logs", id], { env });
      return logs.stdout.includes("initial prompt not sent") && logs.stdout;
    });
    expect(lines).toContain("the agent runtime starts at its first use: no model is configured");
    expect(await (await fetch(`${session.sandbox_url}/svc/health`)).json()).toMatchObject({
      agent: { state: "standby", pid: null },
    });
  }, 120_000);

  it("a project's own gateway, set as its secrets, is its sessions' model: no warning, and a failure names it", async () => {
    // The sandbox's own loopback: nothing listens there, so the gateway is refused at once, named in the error.
    const own = {
      SVC_LLM_BASE_URL: "http://127.0.0.1:9/v1",
      SVC_LLM_API_KEY: "sk-project-own",
      SVC_AGENT_MODEL: "own-m",
    };
    const set = await svc(["secrets", "set", ...Object.entries(own).map(([k, v]) => `${k}=${v}`)], { env });
    expect(set.code, set.stderr).toBe(0);
    try {
      const created = await svc(["sessions", "new"], { env });
      expect(created.code, created.stderr).toBe(0);
      expect(created.stderr).not.toContain("no model is configured");
      const id = created.stdout.trim();
      const chat = await svc(["sessions", "chat", id, "--prompt", "hello?"], { env });
      expect(chat.code).toBe(1);
      expect(chat.stderr).toContain("the model gateway at http://127.0.0.1:9/v1 cannot be reached");
      expect(chat.stderr).not.toContain("sk-project-own");
    } finally {
      await svc(["secrets", "unset", ...Object.keys(own)], { env });
    }
  }, 180_000);
});
