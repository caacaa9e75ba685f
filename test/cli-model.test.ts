import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "./support/api-server.ts";
import { BIN, type CliEnv, cliHome, svc } from "./support/cli.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";

/**
 * `svc sessions chat` against the real stack: a real sandbox and the real opencode, driven by a scripted model
 * gateway that answers, refuses the key, or is gone. The CLI runs from a directory with no link and no
 * SVC_PROJECT_ID: a session id alone finds its project.
 */
describe("svc sessions chat: the agent is ready when the session is, and the model's failures are plain", () => {
  let sandboxed: SandboxedProject;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let home: ReturnType<typeof cliHome>;
  let env: CliEnv;
  let sessionId: string;
  const run = (args: string[]) => svc(args, { env, cwd: home.dir });
  const timed = async (args: string[]) => {
    const started = Date.now();
    return { ...(await run(args)), ms: Date.now() - started };
  };

  beforeAll(async () => {
    llm = await startScriptedLlm([{ when: "Say hello", steps: [{ text: "Hello from the agent." }] }]);
    sandboxed = await startSandboxedProject("Modelled", {
      llm: { baseUrl: llm.url, apiKey: "test-key", model: "scripted" },
    });
    home = cliHome();
    env = { ...home.env, SVC_API_URL: `${sandboxed.api.url}/v1`, SVC_CLI_TOKEN: sandboxed.user.token };
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
    llm?.close();
  });

  // First, so that its session builds the sandbox image and the next one measures a start from the cache.
  it("on a terminal the wait shows a spinner; a stopped session fails at once with its state", async () => {
    const created = await run(["sessions", "new", "--no-wait", "--project", sandboxed.project.id]);
    const id = created.stdout.trim();
    const tty = await execa(
      "script",
      ["-qfec", `${process.execPath} ${BIN} sessions chat ${id} --prompt 'Say hello, please.'`, "/dev/null"],
      { env: { ...process.env, ...env } as Record<string, string>, cwd: home.dir, reject: false },
    );
    expect(tty.exitCode, tty.stdout).toBe(0);
    expect(tty.stdout).toMatch(/⠋ waiting for the session's (sandbox|agent) to start…/);
    expect(tty.stdout).toContain("Hello from the agent.");

    expect((await run(["sessions", "stop", id])).code).toBe(0);
    const stopped = await timed(["sessions", "chat", id, "--prompt", "Say hello, please."]);
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toContain(
      `error: session ${id} is stopped; 'svc sessions restart ${id}' (SESSION_NOT_RUNNING, HTTP 409)`,
    );
    expect(stopped.ms).toBeLessThan(5000);
    expect((await run(["sessions", "rm", id])).code).toBe(0);
  }, 180_000);

  it("chat right after 'sessions new --no-wait' waits for the agent quietly in a pipe, then answers", async () => {
    const created = await timed(["sessions", "new", "--no-wait", "--project", sandboxed.project.id]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).not.toContain("no model");
    sessionId = created.stdout.trim();
    const chat = await timed(["sessions", "chat", sessionId, "--prompt", "Say hello, please."]);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toBe("Hello from the agent.");
    expect(chat.stderr).toBe(`host: selfhost (${sandboxed.api.url})`);
    console.log(
      `sessions new --no-wait -> first answer (cached image, scripted model): ${created.ms + chat.ms} ms (new ${created.ms} ms, chat ${chat.ms} ms)`,
    );
  }, 180_000);

  it("an API error prints its message and code; a session id alone reaches only sessions the token may see", async () => {
    const missing = await run(["sessions", "info", "no-such-session"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("error: session no-such-session not found (SESSION_NOT_FOUND, HTTP 404)");
    const scoped = await run(["sessions", "info", "no-such-session", "--project", sandboxed.project.id]);
    expect(scoped.stderr).toContain(
      "error: session no-such-session not found in this project (SESSION_NOT_FOUND, HTTP 404)",
    );

    const info = await run(["sessions", "info", sessionId, "--json"]);
    expect(info.code, info.stderr).toBe(0);
    expect(JSON.parse(info.stdout)).toMatchObject({ session_id: sessionId, project_id: sandboxed.project.id });

    // A project token of another project learns nothing about this session: the same 404 as for none at all.
    const api = sandboxed.api.url;
    const token = sandboxed.user.token;
    const other = (await call(api, "POST", "/v1/projects", { token, body: { name: "Elsewhere" } })).body;
    const otherToken = (await call(api, "POST", `/v1/projects/${other.id}/cli-token`, { token })).body.token;
    const hidden = await call(api, "GET", `/v1/sessions/${sessionId}`, { token: otherToken });
    expect(hidden.status).toBe(404);
    expect(hidden.body).toEqual({ error: `session ${sessionId} not found`, code: "SESSION_NOT_FOUND" });
    const ownToken = (await call(api, "POST", `/v1/projects/${sandboxed.project.id}/cli-token`, { token })).body.token;
    expect((await call(api, "GET", `/v1/sessions/${sessionId}`, { token: ownToken })).body.session_id).toBe(sessionId);
  }, 60_000);

  it("a gateway that refuses the key (401) fails the prompt within seconds, naming the 401", async () => {
    llm.refuse(401);
    const refused = await timed(["sessions", "chat", sessionId, "--prompt", "Say hello, please."]);
    llm.refuse();
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr).toContain("error: the model gateway refused the API key (401): Incorrect API key provided");
    expect(refused.ms).toBeLessThan(10_000);
  }, 60_000);

  it("a gateway that cannot be reached fails the prompt within seconds and the run stops retrying", async () => {
    llm.close();
    const unreachable = await timed(["sessions", "chat", sessionId, "--prompt", "Say hello, please."]);
    expect(unreachable.code, unreachable.stderr).toBe(1);
    expect(unreachable.stderr).toMatch(
      /error: the model gateway at http:\/\/host\.docker\.internal:\d+\/v1 cannot be reached \(Cannot connect to API/,
    );
    expect(unreachable.ms).toBeLessThan(10_000);
    const session = (await sandboxed.sessions(`/${sessionId}`)).body;
    let busy = true;
    for (let i = 0; i < 40 && busy; i++) {
      busy = (await (await fetch(`${session.sandbox_url}/svc/health`)).json()).busy;
      if (busy) await new Promise((r) => setTimeout(r, 250));
    }
    expect(busy).toBe(false);

    // An initial prompt nobody follows: the daemon aborts its retrying run too, so the sandbox can go idle.
    const created = await run(["sessions", "new", "--prompt", "Say hello, please.", "--project", sandboxed.project.id]);
    expect(created.code, created.stderr).toBe(0);
    const bootId = created.stdout.trim();
    const booted = (await sandboxed.sessions(`/${bootId}`)).body;
    const [container] = await sandboxed.docker.listContainers({ filters: { label: [`dev.svc.session=${bootId}`] } });
    const aborted = "svc-agent: aborted 1 run(s) retrying a model gateway that failed (Cannot connect to API";
    const logs = await waitFor(
      "the daemon's abort of the retrying run",
      async () => {
        // The daemon looks for runs retrying a failed gateway when asked whether it is busy.
        await fetch(`${booted.sandbox_url}/svc/health`);
        const text = (
          await sandboxed.docker.getContainer(container!.Id).logs({ stdout: true, stderr: true })
        ).toString();
        return text.includes(aborted) && text;
      },
      { timeoutMs: 30_000, everyMs: 500 },
    );
    expect(logs).toContain(aborted);
    expect((await (await fetch(`${booted.sandbox_url}/svc/health`)).json()).busy).toBe(false);
  }, 90_000);
});
