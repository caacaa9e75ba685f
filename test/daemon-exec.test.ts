import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { daemonExec as startExec } from "../api/sessions/daemon-exec.ts";
import type { ExecRequest } from "../orchestrator/sandbox/access.ts";
import type { SandboxExec } from "../orchestrator/sandbox/driver.ts";
import { hashSecret } from "../protocol/credential.ts";
import { SESSION_ENV_FILE_NAME } from "../protocol/env.ts";
import { SANDBOX_LINK_PATH } from "../protocol/sandbox-link.ts";
import { startApi, type TestApi } from "./support/api-server.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";

const KEY = `svc_sk_exec-test-${randomUUID().replaceAll("-", "")}`;

/** Every command a test started: a failed test leaves none running, whatever it failed on. */
const started: SandboxExec[] = [];
afterEach(() => {
  for (const running of started.splice(0)) running.close();
});

async function daemonExec(...args: Parameters<typeof startExec>): Promise<SandboxExec> {
  const running = await startExec(...args);
  started.push(running);
  return running;
}

/** Everything a command printed, by stream, and its exit code. */
async function collect(running: SandboxExec): Promise<{ stdout: string; stderr: string; code: number }> {
  const out = { stdout: "", stderr: "" };
  for await (const { stream, data } of running.output) out[stream] += data.toString();
  return { ...out, code: await running.exitCode() };
}

/** Reads the output as it comes; `until(text)` resolves once stdout holds it. */
function follow(running: SandboxExec) {
  let stdout = "";
  const ended = (async () => {
    for await (const { data } of running.output) stdout += data.toString();
    return running.exitCode();
  })();
  return {
    /** Its exit code; fails after `ms` (sooner than the test's own limit, saying what the command printed). */
    async ended(ms = 10_000): Promise<number> {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the command did not end; it printed ${JSON.stringify(stdout)}`)),
          ms,
        );
      });
      return Promise.race([ended, late]).finally(() => clearTimeout(timer));
    },
    read: () => stdout,
    async until(text: string | RegExp, ms = 10_000): Promise<void> {
      const deadline = Date.now() + ms;
      const has = () => (typeof text === "string" ? stdout.includes(text) : text.test(stdout));
      while (!has()) {
        if (Date.now() > deadline) throw new Error(`${text} never came; got ${JSON.stringify(stdout)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

const plain = (cmd: string[], stdin = false): ExecRequest => ({ cmd, tty: false, stdin });

describe("exec over the daemon: GET /svc/exec (the daemon as a local process)", { timeout: 30_000 }, () => {
  let daemon: TestDaemon;
  let workspace: string;
  let home: string;
  const target = () => ({ url: daemon.base, serviceKey: KEY });

  beforeAll(async () => {
    workspace = realpathSync(mkdtempSync(join(tmpdir(), "svc-exec-ws-")));
    home = mkdtempSync(join(tmpdir(), "svc-exec-home-"));
    daemon = await startDaemon({
      serviceKey: KEY,
      sessionId: randomUUID(),
      agentCommand: ["true"],
      // The sandbox's own environment: one variable its session has since removed.
      env: { SVC_AGENT_RUNTIME: "0", SVC_WORKSPACE: workspace, SVC_AGENT_HOME: home, EXEC_REMOVED: "from-container" },
      stdio: "ignore",
    });
  });
  afterAll(() => {
    daemon?.child.kill("SIGKILL");
  });

  it("pipes stdin to the command, keeps stderr apart and gives its exit code", async () => {
    const running = await daemonExec(target(), plain(["sh", "-c", "tr a-z A-Z; echo 'to stderr' >&2; exit 7"], true));
    running.stdin!.write("hello\n");
    running.stdin!.end("world\n");
    expect(await collect(running)).toEqual({ stdout: "HELLO\nWORLD\n", stderr: "to stderr\n", code: 7 });
  });

  it("carries output larger than the daemon holds for a reader that is behind, whole and in order", async () => {
    const running = await daemonExec(target(), plain(["sh", "-c", "seq 1 400000"]));
    let text = "";
    for await (const { data } of running.output) {
      text += data.toString();
      // A slow reader: the daemon has to wait for it rather than queue the whole output.
      await new Promise((r) => setTimeout(r, 5));
    }
    const lines = text.trimEnd().split("\n");
    expect(lines.length).toBe(400_000);
    expect(lines.every((line, i) => line === String(i + 1))).toBe(true);
    expect(await running.exitCode()).toBe(0);
  });

  it("runs in the workspace with the session's environment over the sandbox's", async () => {
    writeFileSync(
      join(home, SESSION_ENV_FILE_NAME),
      JSON.stringify({ EXEC_ADDED: "from-session", EXEC_REMOVED: null }),
    );
    const running = await daemonExec(target(), plain(["sh", "-c", "pwd; env | grep ^EXEC_ | sort"]));
    expect(await collect(running)).toEqual({ stdout: `${workspace}\nEXEC_ADDED=from-session\n`, stderr: "", code: 0 });
  });

  it("gives a command that does not exist 127 and says so, with a terminal or without", async () => {
    const bare = await collect(await daemonExec(target(), plain(["no-such-command-svc", "x"])));
    expect(bare).toEqual({ stdout: "", stderr: "no-such-command-svc: command not found\n", code: 127 });
    const tty = await collect(
      await daemonExec(target(), { cmd: ["no-such-command-svc"], tty: true, stdin: true, cols: 80, rows: 24 }),
    );
    expect(tty.code).toBe(127);
    expect(tty.stdout).toMatch(/no-such-command-svc: not found/);
  });

  it("gives a terminal of the size asked for, and the new size after a resize", async () => {
    const script = "trap 'stty size; exit 0' WINCH; stty size; tput cols; echo ready; while :; do sleep 0.05; done";
    const running = await daemonExec(target(), {
      cmd: ["sh", "-c", script],
      tty: true,
      stdin: true,
      cols: 100,
      rows: 30,
      term: "xterm",
    });
    const out = follow(running);
    await out.until("ready");
    expect(out.read()).toBe("30 100\r\n100\r\nready\r\n");
    await running.resize(50, 20);
    expect(await out.ended()).toBe(0);
    // stty sets the columns, then the rows: a trap quick enough sees the size between the two as well.
    expect(["30 100\r\n100\r\nready\r\n20 50\r\n", "30 100\r\n100\r\nready\r\n30 50\r\n20 50\r\n"]).toContain(
      out.read(),
    );
  });

  it("takes a terminal's keystrokes and hangs up the command when the caller leaves", async () => {
    const marker = join(home, `hup-${randomUUID()}`);
    const script = `trap 'echo hup > ${marker}; exit 1' HUP; read line; echo "got $line"; while :; do sleep 0.05; done`;
    const running = await daemonExec(target(), { cmd: ["sh", "-c", script], tty: true, stdin: true });
    const out = follow(running);
    running.stdin!.write("typed\r");
    await out.until("got typed");
    running.close();
    await out.ended();
    const deadline = Date.now() + 5000;
    while (!existsSync(marker)) {
      if (Date.now() > deadline) throw new Error("the command was not hung up");
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  it("refuses a wrong service key before anything runs", async () => {
    await expect(
      daemonExec({ url: daemon.base, serviceKey: `${KEY}x` }, plain(["sh", "-c", "echo ran"])),
    ).rejects.toMatchObject({ code: "SANDBOX_UNREACHABLE", message: expect.stringMatching(/answered 401/) });
  });
});

describe("exec over a sandbox's link (the daemon dials the API, the API runs commands through the bridge)", {
  timeout: 30_000,
}, () => {
  let db: TestDatabase;
  let api: TestApi;
  let daemon: TestDaemon;
  let linked: string;

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    const sandboxId = randomUUID();
    api.services.sandboxLinks.expect(hashSecret(KEY), sandboxId);
    daemon = await startDaemon({
      serviceKey: KEY,
      sessionId: randomUUID(),
      agentCommand: ["true"],
      env: { SVC_AGENT_RUNTIME: "0", SVC_LINK_URL: `${api.url.replace("http:", "ws:")}${SANDBOX_LINK_PATH}` },
      stdio: "ignore",
    });
    const endpoint = await api.services.sandboxLinks.waitFor(sandboxId, 15_000);
    expect(endpoint).not.toBe(daemon.base);
    linked = endpoint;
  });
  afterAll(async () => {
    daemon?.child.kill("SIGKILL");
    await api?.close();
    await db?.drop();
  });

  it("runs a command and a terminal through the bridge", async () => {
    const running = await daemonExec({ url: linked, serviceKey: KEY }, plain(["sh", "-c", "cat; exit 3"], true));
    running.stdin!.end("over the link\n");
    expect(await collect(running)).toEqual({ stdout: "over the link\n", stderr: "", code: 3 });
    const tty = await daemonExec(
      { url: linked, serviceKey: KEY },
      { cmd: ["stty", "size"], tty: true, stdin: true, cols: 91, rows: 17 },
    );
    expect(await collect(tty)).toEqual({ stdout: "17 91\r\n", stderr: "", code: 0 });
  });
});
