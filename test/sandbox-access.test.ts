import { randomUUID } from "node:crypto";
import { execa, type ResultPromise } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser } from "./support/api-server.ts";
import { BIN, type CliEnv, cliHome, svc } from "./support/cli.ts";
import { containerEnv } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";

const SECRET = "hunter2-sandbox-secret-value";
const ESC = "\u001b";

/**
 * Runs `svc <args>` under a pseudo-terminal (util-linux script), as a person at a terminal would; `before` runs
 * first in the same terminal's shell.
 */
function underPty(
  args: string[],
  env: CliEnv,
  before = "",
): ResultPromise<{ reject: false; env: CliEnv; extendEnv: true }> {
  const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  return execa("script", ["-qfec", `${before}exec ${quoted}`, "/dev/null"], {
    env: { ...env, TERM: "xterm", COLUMNS: "120", LINES: "40" },
    extendEnv: true,
    reject: false,
    timeout: 120_000,
  });
}

/** Resolves once `read()` holds `text`, or fails with what it held after `ms`. */
async function until(read: () => string, text: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!read().includes(text)) {
    if (Date.now() > deadline) throw new Error(`'${text}' never came; got: ${JSON.stringify(read())}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("svc sessions logs, exec, shell and provisioning progress (real API, Docker, sandbox image, CLI)", () => {
  let sandboxed: SandboxedProject;
  let env: CliEnv;
  let id: string;
  const run = (args: string[], input?: string) => svc(args, { env, input });

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Access", { sessionCap: 5 });
    const { api, project, user } = sandboxed;
    await api.services.secrets.set(project.id, { MY_SECRET: SECRET });
    env = { ...cliHome().env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: user.token, SVC_PROJECT_ID: project.id };

    // In a pipe, `sessions new` prints the id and its final line, and none of the spinner's steps.
    const created = await run(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    id = created.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.stderr).toContain(`✓ session ${id} is running`);
    expect(created.stderr).not.toMatch(/starting sandbox|cloning workspace|building image|\r/);
    expect(created.stderr).not.toContain(ESC);
    expect((await sandboxed.sessions(`/${id}`)).body).toMatchObject({ status: "running", progress: null });
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
  });

  it("logs shows the entrypoint's and daemon's lines; -f follows new ones; secrets are masked", async () => {
    const logs = await run(["sessions", "logs", id]);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toMatch(/^svc-entrypoint: starting svc-agent$/m);
    // The daemon listens on the sandbox's loopback only: the API reaches it over the link it dialed.
    expect(logs.stdout).toMatch(/^svc-agent: listening on 127\.0\.0\.1:8000$/m);
    expect(logs.stdout).toMatch(/^svc-agent: link up: ws:\/\/host\.docker\.internal:\d+\/svc\/v1\/sandbox-link$/m);

    const follow = execa(process.execPath, [BIN, "sessions", "logs", id, "-f", "--json"], { env, reject: false });
    let out = "";
    follow.stdout?.on("data", (c) => {
      out += c;
    });
    await until(() => out, "listening on");
    // Anything PID 1 writes is the sandbox's log: a line from a process the agent started, quoting credentials.
    const said = await run([
      "sessions",
      "exec",
      id,
      "--",
      "sh",
      "-c",
      'echo "marker $MY_SECRET $SVC_CLI_TOKEN svc_pat_someoneelses" >/proc/1/fd/2',
    ]);
    expect(said.code, said.stderr).toBe(0);
    await until(() => out, "marker");
    follow.kill("SIGINT");
    expect((await follow).exitCode).toBe(0);
    const marker = out
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((l) => l.line.startsWith("marker"));
    expect(marker).toEqual({ stream: "stderr", line: "marker *** *** svc_pat_***" });
    expect(out).not.toContain(SECRET);

    const tail = await run(["sessions", "logs", id, "--tail", "1"]);
    expect(tail.stdout.trim().split("\n")).toHaveLength(1);
  });

  it("logs come from the sandbox's daemon over its link, not from the engine; the engine's log still has every line", async () => {
    // A record only the keeper's file holds (PID 1 never wrote it): the daemon serves it, the engine never saw it.
    const record = JSON.stringify({ stream: "stdout", line: "only in the kept log" });
    const wrote = await run(["sessions", "exec", id, "--", "sh", "-c", `echo '${record}' >> /var/log/svc/log.jsonl`]);
    expect(wrote.code, wrote.stderr).toBe(0);
    expect((await run(["sessions", "logs", id])).stdout).toMatch(/^only in the kept log$/m);
    const [container] = await sandboxed.docker.listContainers({ filters: { label: [`dev.svc.session=${id}`] } });
    const engine = await execa("docker", ["logs", container!.Id], { all: true });
    expect(engine.all).not.toContain("only in the kept log");
    // The keeper passes PID 1's output on: the engine's log has the daemon's lines as before.
    expect(engine.all).toMatch(/^svc-agent: listening on 127\.0\.0\.1:8000$/m);

    // A daemon that does not answer (its sandbox frozen, its link not yet given up) leaves the log to the engine.
    await execa("docker", ["pause", container!.Id]);
    try {
      const started = Date.now();
      const frozen = await run(["sessions", "logs", id]);
      expect(frozen.code, frozen.stderr).toBe(0);
      expect(frozen.stdout).toMatch(/^svc-agent: listening on 127\.0\.0\.1:8000$/m);
      expect(frozen.stdout).not.toContain("only in the kept log");
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      await execa("docker", ["unpause", container!.Id]);
    }
  });

  it("exec streams stdout and stderr apart, passes stdin through and returns the command's exit code", async () => {
    const res = await run(["sessions", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7"]);
    expect(res.code).toBe(7);
    expect(res.stdout).toBe("out");
    expect(res.stderr.split("\n")).toContain("err");
    expect(res.stderr).not.toContain("error:");

    // A session id alone is enough: its project comes from the API.
    const upper = await svc(["sessions", "exec", id, "--", "tr", "a-z", "A-Z"], {
      env: { ...env, SVC_PROJECT_ID: undefined },
      input: "hello sandbox\n",
    });
    expect(upper).toMatchObject({ code: 0, stdout: "HELLO SANDBOX" });
    // More than one frame, and more than a pipe buffer, both ways.
    const big = "x".repeat(300_000);
    const counted = await run(
      ["sessions", "exec", id, "--", "sh", "-c", "wc -c; head -c 200000 /dev/zero | tr '\\0' y"],
      big,
    );
    expect(counted.code, counted.stderr).toBe(0);
    expect(counted.stdout.startsWith("300000\n")).toBe(true);
    expect(counted.stdout.length).toBe("300000\n".length + 200_000);

    // In the workspace, as the sandbox's own user (the one the daemon runs as).
    const where = await run(["sessions", "exec", id, "--", "sh", "-c", "pwd; id -u; test -f README.md && echo cloned"]);
    const daemonUid = await run(["sessions", "exec", id, "--", "sh", "-c", "stat -c %u /proc/1"]);
    expect(where.stdout.split("\n")).toEqual(["/workspace", daemonUid.stdout.trim(), "cloned"]);

    // A reader that leaves early ends the command's output as a pipeline's would.
    const svcCommand = [process.execPath, BIN, "sessions", "exec", id, "--", "yes"].join(" ");
    const piped = await execa("bash", ["-c", `set -o pipefail; ${svcCommand} | head -2`], { env, reject: false });
    expect(piped.stdout).toBe("y\ny");
    expect(piped.exitCode).toBe(141);
    expect(piped.stderr).not.toMatch(/error|EPIPE/i);

    // A command that cannot start exits as a shell says it: 127 for one not found (the daemon runs it).
    const missing = await run(["sessions", "exec", id, "--", "no-such-command"]);
    expect(missing.code).toBe(127);
    expect(missing.stdout + missing.stderr).toContain("no-such-command");
  });

  it("shell opens an interactive shell under a terminal and refuses without one", async () => {
    // A 100x30 terminal that becomes 90x20 three seconds in, as a window being resized.
    const resize = "stty cols 100 rows 30; (sleep 3; stty cols 90 rows 20 </dev/tty) & ";
    const shell = underPty(["sessions", "shell", id], env, resize);
    let out = "";
    shell.stdout?.on("data", (c) => {
      out += c;
    });
    await until(() => out, "# ");
    shell.stdin?.write("echo $((6*7)); stty size\r");
    await until(() => out, "42");
    await until(() => out, "30 100");
    const resized = Date.now() + 15_000;
    while (!out.includes("20 90") && Date.now() < resized) {
      shell.stdin?.write("stty size\r");
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(out).toContain("20 90");
    shell.stdin?.write("exit 3\r");
    const done = await shell;
    expect(done.exitCode, out).toBe(3);

    const piped = await run(["sessions", "shell", id]);
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain(
      `error: svc sessions shell needs a terminal; to run a command without one: svc sessions exec ${id} -- <cmd>`,
    );
  });

  it("another project's token, a stranger, a session's own token and its service key get 403 and change nothing", async () => {
    const { api, user } = sandboxed;
    const other = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Other" } })).body;
    const otherToken = (await call(api.url, "POST", `/v1/projects/${other.id}/cli-token`, { token: user.token })).body
      .token;
    const stranger = await seedUser(api.services, "stranger");
    const [container] = await sandboxed.docker.listContainers({ filters: { label: [`dev.svc.session=${id}`] } });
    const sandboxEnv = await containerEnv(sandboxed.docker, container!.Id);
    const serviceKey = sandboxEnv.SVC_TOKEN!;
    const refusals = [
      [
        sandboxEnv.SVC_CLI_TOKEN!,
        "a session's token cannot read sandbox logs or run commands in sandboxes: use your own login (svc login) (PROJECT_TOKEN_NOT_ALLOWED, HTTP 403)",
      ],
      [otherToken, "this token is scoped to another project (TOKEN_PROJECT_MISMATCH, HTTP 403)"],
      [stranger.token, "you are not a member of this project's account (NOT_A_MEMBER, HTTP 403)"],
      [
        serviceKey,
        "the sandbox service key is not an API token; use SVC_CLI_TOKEN (SERVICE_KEY_NOT_ALLOWED, HTTP 403)",
      ],
    ];
    for (const [token, message] of refusals) {
      const as = { ...env, SVC_CLI_TOKEN: token };
      const exec = await svc(["sessions", "exec", id, "--", "touch", "/workspace/pwned"], { env: as });
      expect(exec, token).toMatchObject({ code: 1, stdout: "" });
      expect(exec.stderr).toContain(`error: ${message}`);
      const logs = await svc(["sessions", "logs", id], { env: as });
      expect(logs.code).toBe(1);
      expect(logs.stderr).toContain(`error: ${message}`);
    }
    expect((await run(["sessions", "exec", id, "--", "ls", "/workspace"])).stdout).not.toContain("pwned");
  });

  it("a broken .svc/Dockerfile on main fails `sessions new` naming the step, with the CR hint and no escapes", async () => {
    const { project, user } = sandboxed;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.git(["reset", "-q", "--hard", "origin/main"]);
    // A broken one merged to main, whose failing command prints in colour.
    await repo.commit("broken image", {
      ".svc/Dockerfile":
        "ARG SVC_BASE_IMAGE\nFROM $SVC_BASE_IMAGE\nRUN true\nRUN printf '\\033[31mno makefile here\\033[0m\\n'; exit 2\nRUN true\n",
    });
    await landOnDefault(sandboxed.api.url, user.token, project.id, repo, "broken image");

    const broken = await run(["sessions", "new"]);
    expect(broken.code).toBe(1);
    const failedId = broken.stdout.trim();
    expect(broken.stderr).not.toContain(ESC);
    expect(broken.stderr).toContain(`error: session ${failedId} failed: the project's .svc/Dockerfile (main at `);
    expect(broken.stderr).toMatch(/\) failed at Step 4\/5 : RUN printf .*exit 2\nno makefile here\n/);
    expect(broken.stderr).toContain(
      "Fix .svc/Dockerfile on main through a change request (svc cr open), then start a new session",
    );
    const stored = (await sandboxed.sessions(`/${failedId}`)).body;
    expect(stored).toMatchObject({ status: "failed", progress: null });
    expect(stored.error).toContain("Step 4/5");
    expect(stored.error).not.toContain(ESC);
    const [sandboxRow] = await sandboxed.db.sql.query<{ error: string }>(
      "select error from session_sandboxes where session_id = $1",
      [failedId],
    );
    expect(sandboxRow!.error).not.toContain(ESC);

    // The hint's way out: a fixed .svc/Dockerfile (with a slow step) merged; on a terminal the spinner shows the steps.
    await repo.commit("fixed image", {
      // A step of its own every run, so neither the image nor the layer cache skips it.
      ".svc/Dockerfile": `ARG SVC_BASE_IMAGE\nFROM $SVC_BASE_IMAGE\nRUN true\nRUN sleep 2 && echo ${randomUUID()}\n`,
    });
    await landOnDefault(sandboxed.api.url, user.token, project.id, repo, "fixed image");
    const slow = underPty(["sessions", "new"], env);
    const done = await slow;
    expect(done.exitCode, done.stdout).toBe(0);
    expect(done.stdout).toContain("building image: step 4/4 RUN sleep 2");
    expect(done.stdout).toContain("starting sandbox");
    expect(done.stdout).toMatch(/✓ session [0-9a-f-]{36} is running/);
  });

  it("logs -f ends with the sandbox; a stopped session answers exec and logs as every other call does", async () => {
    const follow = execa(process.execPath, [BIN, "sessions", "logs", id, "--follow"], { env, reject: false });
    let out = "";
    follow.stdout?.on("data", (c) => {
      out += c;
    });
    await until(() => out, "listening on");
    expect((await run(["sessions", "stop", id])).code).toBe(0);
    expect((await follow).exitCode).toBe(0);

    const expected = `error: session ${id} is stopped; 'svc sessions restart ${id}' (SESSION_NOT_RUNNING, HTTP 409)`;
    const preview = await run(["sessions", "preview", id]);
    expect(preview.stderr).toContain(expected);
    for (const args of [
      ["sessions", "exec", id, "--", "true"],
      ["sessions", "logs", id],
    ]) {
      const res = await run(args);
      expect(res.code, args.join(" ")).toBe(1);
      expect(res.stderr).toContain(expected);
    }
  });
});
