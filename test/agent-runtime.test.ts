import type Docker from "dockerode";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import type { DaemonHealth } from "../protocol/daemon.ts";
import { call, type seedUser, type TestApi } from "./support/api-server.ts";
import { BIN, cliHome, svc } from "./support/cli.ts";
import { containerEnv } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";

describe("the real opencode runtime in a sandbox, driven by a scripted model", () => {
  let sandboxed: SandboxedProject;
  let docker: Docker;
  let api: TestApi;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };

  beforeAll(async () => {
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
        when: "Say hello",
        steps: [
          { tool: "bash", args: { command: "echo hi > chat.txt", description: "write chat.txt" } },
          { text: "Hello from the agent." },
        ],
      },
      {
        when: "Show the secret",
        steps: [
          {
            tool: "bash",
            args: {
              command: "(printenv ROTATED || echo unset) | tr -d '\\n' > seen.txt",
              description: "write seen.txt",
            },
          },
          { text: "Written." },
        ],
      },
      {
        when: "What did you write",
        steps: [{ text: "I wrote chat.txt." }],
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
    sandboxed = await startSandboxedProject("Agentic", {
      llm: { baseUrl: llm.url, apiKey: "test-key", model: "scripted" },
    });
    ({ docker, api, user, project } = sandboxed);
    // In the sandbox's own environment from its creation on: the test below changes it, then takes it away.
    const secret = await call(api.url, "PUT", `/v1/projects/${project.id}/secrets`, {
      token: user.token,
      body: { secrets: { ROTATED: "at-creation" } },
    });
    expect(secret.status).toBe(200);
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
    llm?.close();
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

  it("svc sessions chat: one message with --prompt streams the reply; a piped REPL carries on the conversation", async () => {
    const { session } = await sandbox();
    const home = cliHome();
    const env = { ...home.env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: user.token, SVC_PROJECT_ID: project.id };
    const once = await svc(["sessions", "chat", session.session_id, "--prompt", "Say hello, please."], { env });
    expect(once.code, once.stderr).toBe(0);
    expect(once.stdout).toBe("Hello from the agent."); // execa drops the final newline
    expect(once.stderr).toContain("✓ bash: echo hi > chat.txt");

    // No id: the newest running session. --json: the events themselves; --new: another conversation.
    const json = await svc(["sessions", "talk", "--prompt", "What did you write?", "--json"], { env });
    expect(json.code, json.stderr).toBe(0);
    const events = json.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events.at(-1)).toMatchObject({ type: "idle" });
    expect(
      events
        .filter((e) => e.type === "text")
        .map((e) => e.delta)
        .join(""),
    ).toBe("I wrote chat.txt.");
    const fresh = await svc(["sessions", "chat", "--new", "--prompt", "What did you write?", "--json"], { env });
    const freshSession = JSON.parse(fresh.stdout.trim().split("\n").at(-1)!).session;
    expect(freshSession).not.toBe(events.at(-1).session);

    const repl = await svc(["sessions", "chat", session.session_id], {
      env,
      input: "Say hello again.\nWhat did you write?\n",
    });
    expect(repl.code, repl.stderr).toBe(0);
    expect(repl.stdout).toBe("Hello from the agent.\nI wrote chat.txt.");

    const messages = `/v1/projects/${project.id}/sessions/${session.session_id}/messages`;
    for (const body of [{}, { text: "" }, { text: "x", session: "ses_other" }, { text: "x", new: "yes" }]) {
      expect((await call(api.url, "POST", messages, { token: user.token, body })).status, JSON.stringify(body)).toBe(
        400,
      );
    }
    expect((await svc(["sessions", "chat", "--prompt", " "], { env })).code).toBe(2);
    const stopped = await svc(["sessions", "chat", "not-a-session", "--prompt", "hi"], { env });
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toContain("not found");
  }, 180_000);

  it("svc sessions chat on a terminal: Ctrl-C aborts the running reply, the next message still gets its answer", async () => {
    const { session } = await sandbox();
    const home = cliHome();
    const env = {
      ...process.env,
      ...home.env,
      SVC_API_URL: `${api.url}/v1`,
      SVC_CLI_TOKEN: user.token,
      SVC_PROJECT_ID: project.id,
    };
    // `script` gives the CLI a real terminal; what we write is what a person types.
    const tty = execa(
      "script",
      ["-qfec", `${process.execPath} ${BIN} sessions chat ${session.session_id}`, "/dev/null"],
      {
        env: env as Record<string, string>,
        reject: false,
      },
    );
    let screen = "";
    tty.stdout!.on("data", (chunk) => (screen += chunk));
    const waitFor = async (text: string, after = 0) => {
      for (let i = 0; i < 200 && !screen.includes(text, after); i++) await new Promise((r) => setTimeout(r, 100));
      expect(screen.slice(after)).toContain(text);
      return screen.indexOf(text, after);
    };
    await waitFor("you> ");
    tty.stdin!.write("Wait for a long time.\r");
    const health = async () => (await (await fetch(`${session.sandbox_url}/svc/health`)).json()) as { busy: boolean };
    for (let i = 0; i < 60 && !(await health()).busy; i++) await new Promise((r) => setTimeout(r, 250));
    tty.stdin!.write("\x03");
    const aborted = await waitFor("(aborted)");
    tty.stdin!.write("Say hello again.\r");
    await waitFor("Hello from the agent.", aborted);
    tty.stdin!.write("\x04");
    expect((await tty).exitCode).toBe(0);
  }, 120_000);

  it("a secret set or unset while the session runs reaches the agent's next shell command; the runtime goes on", async () => {
    const { session } = await sandbox();
    const env = sandboxed.cliEnv;
    const secrets = (method: string, body: unknown) =>
      call(api.url, method, `/v1/projects/${project.id}/secrets`, { token: user.token, body });
    const restarts = async () =>
      (await (await fetch(`${session.sandbox_url}/svc/health`)).json()).agent.restarts as number;
    /** What `svc sessions exec` sees, once the change has reached the sandbox (it is sent as the secret changes). */
    const execSees = (value: string) =>
      waitFor(
        `exec to see ROTATED=${value}`,
        async () =>
          (
            await svc(["sessions", "exec", session.session_id, "--", "sh", "-c", "printenv ROTATED || echo unset"], {
              env,
            })
          ).stdout === value,
        { timeoutMs: 10_000, everyMs: 200 },
      );
    /** What the agent's own shell command sees, in the conversation it had. */
    const agentSees = async () => {
      const chat = await svc(["sessions", "chat", session.session_id, "--prompt", "Show the secret."], { env });
      expect(chat.code, chat.stderr).toBe(0);
      return (await svc(["sessions", "exec", session.session_id, "--", "cat", "seen.txt"], { env })).stdout;
    };
    const before = await restarts();
    expect(await agentSees()).toBe("at-creation");

    expect((await secrets("PUT", { secrets: { ROTATED: "rotated" } })).status).toBe(200);
    await execSees("rotated");
    expect(await agentSees()).toBe("rotated");

    expect((await secrets("DELETE", { names: ["ROTATED"] })).status).toBe(200);
    await execSees("unset");
    expect(await agentSees()).toBe("unset");
    expect(await restarts()).toBe(before);
  }, 120_000);

  it("re-pulls the session branch and restarts the runtime in place on POST /svc/refresh", async () => {
    const { session, auth } = await sandbox();
    // Someone pushes to the session branch from outside the sandbox.
    const outside = await workRepo(authedUrl(project.repo_url, user.token));
    await outside.git(["fetch", "-q", "origin", session.session_id]);
    await outside.checkout("side", { create: true, from: "FETCH_HEAD" });
    const pushed = await outside.commit("from outside", { "outside.txt": "o\n" });
    await outside.pushed(`HEAD:refs/heads/${session.session_id}`);

    const before = (await (await fetch(`${session.sandbox_url}/svc/health`)).json()).agent.pid;
    const refresh = await fetch(`${session.sandbox_url}/svc/refresh`, { method: "POST", headers: auth, body: "{}" });
    expect(refresh.status).toBe(200);
    expect(await refresh.json()).toEqual({ commit: pushed, restarted: true });
    const health = await (await fetch(`${session.sandbox_url}/svc/health`)).json();
    expect(health.repo.commit).toBe(pushed);
    expect(health.agent.pid).not.toBe(before);
  }, 120_000);
  it("a session's messages go to its own agent; one for an agent its runtime does not define is refused, naming those it does", async () => {
    const created = await call(api.url, "POST", `/v1/projects/${project.id}/sessions`, {
      token: user.token,
      body: { agent: "plan" },
    });
    expect(created.status).toBe(201);
    const id = created.body.session_id as string;
    const env = sandboxed.cliEnv;
    // No prompt yet: the session runs, and its agent runtime waits for its first use, no opencode process at all.
    const running = await waitFor(
      "the plan session running",
      async () => {
        const s = (await call(api.url, "GET", `/v1/projects/${project.id}/sessions/${id}`, { token: user.token })).body;
        return s.status === "running" ? s : undefined;
      },
      { timeoutMs: 120_000, everyMs: 200 },
    );
    const health = await waitFor("the runtime on standby", async () => {
      const h = (await (await fetch(`${running.sandbox_url}/svc/health`)).json()) as DaemonHealth;
      return h.agent.state === "standby" ? h : undefined;
    });
    expect(health.agent).toMatchObject({ state: "standby", pid: null });
    const ps = await svc(["sessions", "exec", id, "--", "sh", "-c", "pgrep -x opencode || echo none"], { env });
    expect(ps.stdout.trim()).toBe("none");
    const messages = `/v1/projects/${project.id}/sessions/${id}/messages`;
    const send = (body: unknown) => call(api.url, "POST", messages, { token: user.token, body });
    // The first message starts it and waits for its boot (409 only past the API's wait, on a loaded machine).
    const sent = await waitFor(
      "a message the plan session's agent takes",
      async () => {
        const res = await send({ text: "Say hello, please." });
        return res.status === 409 ? undefined : res;
      },
      { timeoutMs: 120_000, everyMs: 500 },
    );
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    // opencode's own record of the conversation: the message ran as the session's agent, not the runtime's default.
    const record = await svc(
      [
        "sessions",
        "exec",
        id,
        "--",
        "curl",
        "-s",
        `http://127.0.0.1:4096/session/${sent.body.conversation}/message?directory=/workspace`,
      ],
      { env },
    );
    const asked = (JSON.parse(record.stdout) as { info: { role: string; agent: string } }[]).find(
      (m) => m.info.role === "user",
    );
    expect(asked?.info.agent).toBe("plan");

    const refused = await send({ text: "hello", agent: "plna" });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: "AGENT_NOT_FOUND", field: "agent" });
    expect(refused.body.error).toMatch(
      /^agent 'plna' is not defined in this session; its agents: .*\bbuild\b.*\bplan\b/,
    );
    expect(refused.body.error).not.toMatch(/\btitle\b/);
    await call(api.url, "DELETE", `/v1/projects/${project.id}/sessions/${id}`, { token: user.token });
  }, 240_000);
});
