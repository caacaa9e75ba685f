import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VERSION } from "../protocol/version.ts";
import { call } from "./support/api-server.ts";
import { BIN, type CliEnv, cliHome, freePort, machineAddress, svc, svcTty } from "./support/cli.ts";

describe("svc self-host (embedded mode, the real CLI binary)", () => {
  const home = cliHome();
  let port: number;

  const storedConfig = () => JSON.parse(readFileSync(home.env.SVC_CONFIG_FILE!, "utf8"));
  const run = (args: string[], env: CliEnv = {}) => svc(args, { env: { ...home.env, ...env } });
  const answers = (url: string) =>
    fetch(`${url}/v1/health`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );

  beforeAll(async () => {
    port = await freePort();
  });
  afterAll(async () => {
    await svc(["self-host", "stop"], { env: home.env });
  });

  it("starts in the background, registers the selfhost host with a working admin token", async () => {
    const start = await svc(["self-host", "start", "--port", String(port)], { env: home.env });
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout.trim()).toBe(`http://127.0.0.1:${port}`);

    const config = storedConfig();
    expect(config.active_host).toBe("selfhost");
    expect(config.hosts.selfhost.url).toBe(`http://127.0.0.1:${port}`);
    expect(statSync(home.env.SVC_CONFIG_FILE!).mode & 0o777).toBe(0o600);

    const me = await call(config.hosts.selfhost.url, "GET", "/v1/accounts/me", { token: config.hosts.selfhost.token });
    expect(me.status).toBe(200);
    expect(me.body.user.email).toBe("admin@selfhost.local");
  });

  it("listens on loopback by default: the machine's own address gets nothing", async () => {
    expect(await answers(`http://127.0.0.1:${port}`)).toBe(true);
    expect(await answers(`http://${machineAddress()}:${port}`)).toBe(false);
  });

  it("is a no-op that says so when already running; --json says so too", async () => {
    const again = await svc(["self-host", "start"], { env: home.env });
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/already running/);
    const json = await run(["self-host", "start", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      url: `http://127.0.0.1:${port}`,
      port,
      listen: "127.0.0.1",
      already_running: true,
    });
    const moved = await run(["self-host", "start", "--listen", "0.0.0.0"]);
    expect(moved.code).toBe(1);
    expect(moved.stderr).toBe(
      "error: svc self-host is already running on 127.0.0.1; run 'svc self-host restart --listen 0.0.0.0'",
    );
  });

  it("status shows mode, URL, version, data dir, model and running sessions", async () => {
    const status = await run(["self-host", "status"]);
    expect(status.code, status.stderr).toBe(0);
    const pid = readFileSync(join(home.env.SVC_HOME!, "run", "api.pid"), "utf8").trim();
    expect(status.stdout).toBe(
      [
        `status:   running (pid ${pid})`,
        "mode:     embedded (PGlite in the data dir)",
        `url:      http://127.0.0.1:${port}`,
        "listen:   127.0.0.1",
        `version:  ${VERSION}`,
        `data dir: ${home.env.SVC_HOME}`,
        "model:    no: svc self-host env set SVC_LLM_BASE_URL=… SVC_LLM_API_KEY=… SVC_AGENT_MODEL=…",
        "sessions: 0 running",
      ].join("\n"),
    );
    const json = await run(["self-host", "status", "--json"]);
    expect(JSON.parse(json.stdout)).toEqual({
      status: "running",
      mode: "embedded",
      url: `http://127.0.0.1:${port}`,
      listen: "127.0.0.1",
      version: VERSION,
      api_version: VERSION,
      database: "pglite",
      data_dir: home.env.SVC_HOME,
      pid: Number(pid),
      model_configured: false,
      model: null,
      sessions_running: 0,
      compose_project: null,
      services: null,
    });
  });

  it("persists env values and masks secrets in the listing", async () => {
    const set = await run(["self-host", "env", "set", "SVC_LLM_API_KEY=sk-verysecretvalue", "SVC_AGENT_MODEL=m1"]);
    expect(set.code).toBe(0);
    expect(set.stderr).toBe("✓ saved SVC_LLM_API_KEY, SVC_AGENT_MODEL; run 'svc self-host restart' to apply");
    const ls = await run(["self-host", "env", "ls"]);
    expect(ls.stdout).toContain("SVC_AGENT_MODEL\tm1\tmodel the agents ask the gateway for");
    expect(ls.stdout).toContain("SVC_LLM_API_KEY\tsk-…*****\tAPI key sent to the model gateway");
    expect(ls.stdout).not.toContain("verysecretvalue");
    const bare = await run(["self-host", "env", "set", "sk-bare-secret-value"]);
    expect(bare.code).toBe(2);
    expect(bare.stderr + bare.stdout).not.toContain("sk-bare-secret-value");
  });

  it("env ls shows every known setting with its meaning, unset ones as unset", async () => {
    const ls = await run(["self-host", "env", "ls"]);
    expect(ls.code).toBe(0);
    const lines = ls.stdout.split("\n");
    expect(lines).toContain(
      "SVC_LLM_BASE_URL\tunset\tOpenAI-compatible model gateway sandboxes use (a loopback URL means this machine)",
    );
    expect(lines).toContain("SVC_SESSION_CAP\tunset (default 5)\tsessions that may run at once");
    // What `start` sets itself is not listed as something to set.
    expect(ls.stdout).not.toMatch(/^SVC_PORT\t/m);
    const json = JSON.parse((await run(["self-host", "env", "ls", "--json"])).stdout);
    expect(json.find((e: { key: string }) => e.key === "SVC_LLM_API_KEY")).toEqual({
      key: "SVC_LLM_API_KEY",
      value: "sk-…*****",
      set: true,
      known: true,
      secret: true,
      kind: "secret",
      meaning: "API key sent to the model gateway",
      default: null,
    });
    expect(json.find((e: { key: string }) => e.key === "SVC_LLM_BASE_URL")).toMatchObject({ set: false, value: null });
  });

  it("env set checks known keys and warns about unknown ones with the nearest known key", async () => {
    const typo = await run(["self-host", "env", "set", "SVC_AGENT_MODLE=m2"]);
    expect(typo.code).toBe(0);
    expect(typo.stderr).toBe(
      [
        "warning: SVC_AGENT_MODLE is not a setting svc knows (did you mean SVC_AGENT_MODEL?); saved anyway",
        "✓ saved SVC_AGENT_MODLE; run 'svc self-host restart' to apply",
      ].join("\n"),
    );
    expect((await run(["self-host", "env", "ls"])).stdout).toContain(
      "SVC_AGENT_MODLE\tm2\tnot a setting svc knows: passed to the stack's environment as is",
    );
    const removed = await run(["self-host", "env", "set", "SVC_AGENT_MODLE=", "--json"]);
    expect(JSON.parse(removed.stdout)).toEqual({
      saved: [],
      removed: ["SVC_AGENT_MODLE"],
      warnings: ["SVC_AGENT_MODLE is not a setting svc knows (did you mean SVC_AGENT_MODEL?); saved anyway"],
      restart_needed: true,
    });

    const refusals: [string, string][] = [
      [
        "SVC_LLM_BASE_URL=localhost:4000",
        "error: SVC_LLM_BASE_URL must be a URL: must start with http:// or https:// (got 'localhost:4000')",
      ],
      ["SVC_LLM_BASE_URL=not a url", "error: SVC_LLM_BASE_URL must be a URL: Invalid URL (got 'not a url')"],
      ["SVC_SESSION_CAP=lots", "error: SVC_SESSION_CAP must be a whole number (got 'lots')"],
      [
        "SVC_LOG_LEVEL=loud",
        `error: SVC_LOG_LEVEL must be one of its choices: Invalid option: expected one of "fatal"|"error"|"warn"|"info"|"debug"|"trace"|"silent" (got 'loud')`,
      ],
      ["SVC_PORT=8080", "error: SVC_PORT is not set with env set: it comes from svc self-host start --port"],
      // A secret's value never appears in the refusal.
      [
        "DATABASE_URL=mysql://app:hunter2@db/x",
        "error: DATABASE_URL must be a URL: must start with postgres:// or postgresql://",
      ],
    ];
    for (const [pair, message] of refusals) {
      const res = await run(["self-host", "env", "set", "SVC_AGENT_MODEL=kept-out", pair]);
      expect(res.code, pair).toBe(2);
      expect(res.stderr, pair).toBe(message);
    }
    // A refused line stores nothing of it, the valid pairs beside the bad one included.
    expect((await run(["self-host", "env", "ls"])).stdout).not.toContain("kept-out");
  });

  it("shows the stack's logs as readable lines, JSON lines with --json, and without leaking the admin token", async () => {
    const logs = await run(["self-host", "logs", "api", "-n", "50"]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  Server listening at http://127\\.0\\.0\\.1:${port}$`, "m"),
    );
    expect(logs.stdout).not.toMatch(/^\{/m);
    expect(logs.stdout).not.toContain(storedConfig().hosts.selfhost.token);
    const json = await run(["self-host", "logs", "-n", "50", "--json"]);
    const entries = json.stdout.split("\n").map((l) => JSON.parse(l));
    expect(entries.some((e) => e.level === 30 && e.msg.startsWith("Server listening at"))).toBe(true);
    const unknown = await run(["self-host", "logs", "nope"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe("error: unknown service 'nope'; services: api");
  });

  it("colours log levels on a terminal only, and never with NO_COLOR", async () => {
    const tty = await svcTty(["self-host", "logs", "-n", "5"], { env: { ...home.env, NO_COLOR: undefined } });
    expect(tty.code).toBe(0);
    expect(tty.output).toContain("\x1b[32mINFO \x1b[0m Server listening at");
    const plain = await svcTty(["self-host", "logs", "-n", "5"], { env: { ...home.env, NO_COLOR: "1" } });
    expect(plain.output).toMatch(/^\d\d:\d\d:\d\d INFO {2}Server listening at/m);
    expect(plain.output).not.toContain("\x1b");
    const piped = await run(["self-host", "logs", "-n", "5"], { NO_COLOR: undefined });
    expect(piped.stdout).not.toContain("\x1b");
  });

  it("restart applies env set values", async () => {
    const before = readFileSync(join(home.env.SVC_HOME!, "run", "api.pid"), "utf8").trim();
    await run(["self-host", "env", "set", "SVC_LOG_LEVEL=debug"]);
    const restart = await run(["self-host", "restart", "--json"]);
    expect(restart.code, restart.stderr).toBe(0);
    const result = JSON.parse(restart.stdout);
    expect(result).toMatchObject({
      url: `http://127.0.0.1:${port}`,
      already_running: false,
      stopped_pid: Number(before),
    });
    expect(result.pid).not.toBe(Number(before));
    await fetch(`http://127.0.0.1:${port}/v1/health`);
    // At debug the API logs every request: the setting reached the new process.
    const logs = await run(["self-host", "logs", "-n", "20"]);
    expect(logs.stdout).toMatch(
      /^\d\d:\d\d:\d\d INFO {2}incoming request reqId=req-1 req=\{"method":"GET","url":"\/v1\/health"/m,
    );
    // The next restart (logs -f below) puts the level back.
    await run(["self-host", "env", "set", "SVC_LOG_LEVEL="]);
  });

  it("logs -f keeps printing new lines as they come", async () => {
    const follow = execa(process.execPath, [BIN, "self-host", "logs", "-f", "-n", "1", "--json"], {
      env: home.env,
      reject: false,
    });
    let out = "";
    follow.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    await new Promise((r) => setTimeout(r, 500));
    expect((await run(["self-host", "restart"])).code).toBe(0);
    for (let i = 0; i < 50 && !/Server listening/.test(out); i++) await new Promise((r) => setTimeout(r, 100));
    follow.kill();
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining(["shutting down", expect.stringMatching(/^Server listening/)]),
    );
  });

  it("keeps data and the admin token across stop and start; status says stopped", async () => {
    const { url, token } = storedConfig().hosts.selfhost;
    const created = await call(url, "POST", "/v1/projects", { token, body: { name: "Survivor" } });
    expect(created.status).toBe(201);
    expect(JSON.parse((await run(["self-host", "status", "--json"])).stdout).sessions_running).toBe(0);

    const stop = await run(["self-host", "stop", "--json"]);
    expect(stop.code).toBe(0);
    expect(JSON.parse(stop.stdout)).toEqual({
      stopped: true,
      mode: "embedded",
      pid: expect.any(Number),
      sessions_stopped: 0,
      // Its sandbox network, when an earlier test left one with no sandbox on it.
      networks_removed: expect.any(Array),
    });
    await expect(fetch(`${url}/v1/health`)).rejects.toThrow();
    const again = await run(["self-host", "stop", "--json"]);
    expect(again.stderr).toBe("svc self-host is not running");
    expect(JSON.parse(again.stdout)).toEqual({
      stopped: false,
      mode: null,
      pid: null,
      sessions_stopped: 0,
      networks_removed: [],
    });
    const status = await run(["self-host", "status"]);
    expect(status.code).toBe(0);
    expect(status.stdout.split("\n")[0]).toBe("status:   stopped; start it with 'svc self-host start'");
    expect(status.stdout).toContain("sessions: unknown: the stack is stopped");
    expect(JSON.parse((await run(["self-host", "status", "--json"])).stdout)).toMatchObject({
      status: "stopped",
      pid: null,
      sessions_running: null,
    });
    const doctor = await run(["self-host", "doctor"]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout.split("\n")[0]).toBe(`✗ the stack does not answer at ${url}: run 'svc self-host start'`);

    const start = await run(["self-host", "start"]);
    expect(start.code, start.stderr).toBe(0);
    expect(storedConfig().hosts.selfhost.token).toBe(token);
    const list = await call(url, "GET", "/v1/projects", { token });
    expect(list.status).toBe(200);
    expect(list.body.projects.map((p: { id: string }) => p.id)).toContain(created.body.id);
  });

  it("--listen 0.0.0.0 lets other machines in, and is remembered until changed", async () => {
    const open = await run(["self-host", "restart", "--listen", "0.0.0.0"]);
    expect(open.code, open.stderr).toBe(0);
    expect(open.stderr).toContain(`it listens on every address: other machines reach it on port ${port}`);
    expect(await answers(`http://${machineAddress()}:${port}`)).toBe(true);
    await run(["self-host", "restart"]);
    expect(await answers(`http://${machineAddress()}:${port}`)).toBe(true);
    expect((await run(["self-host", "restart", "--listen", "127.0.0.1"])).code).toBe(0);
    expect(await answers(`http://${machineAddress()}:${port}`)).toBe(false);
    expect(await answers(`http://127.0.0.1:${port}`)).toBe(true);
  });
});

describe("svc exit codes", () => {
  const home = cliHome();
  it.each([
    [["version"], 0],
    [["--version"], 0],
    [["help"], 0],
    [["--help"], 0],
    [["projets"], 2],
    [["cr", "frobnicate"], 2],
    [["cr", "show"], 2],
    [["cr", "ls", "--status", "draft"], 2],
    [["cr", "show", "not-a-ref"], 2],
    [["sessions", "preview", "x", "99999"], 2],
    [["self-host", "nope"], 2],
    [["self-host", "start", "--port", "99999"], 2],
    [["self-host", "start", "--bogus-flag"], 2],
    [["self-host", "env", "set"], 2],
    [["self-host", "start", "--listen", "everywhere"], 2],
    [["self-host", "status", "--bogus-flag"], 2],
    [["self-host", "doctor", "extra"], 2],
  ])("svc %j exits %i", async (args, code) => {
    const res = await svc(args as string[], { env: home.env });
    expect(res.code, res.stderr).toBe(code);
  });

  it("scaffolds `svc <project-name>` into a new directory next to the current one", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "svc-new-"));
    const res = await svc(["my-new-app"], { env: home.env, cwd });
    expect(res.code, res.stderr).toBe(0);
    expect(existsSync(join(cwd, "my-new-app", "svc.toml"))).toBe(true);
    expect(existsSync(join(cwd, "my-new-app", ".svc", "Dockerfile"))).toBe(true);
    expect(existsSync(join(cwd, "my-new-app", ".svc", "link.json"))).toBe(false);
    expect((await svc(["my-new-app"], { env: home.env, cwd })).code).toBe(1);
  });

  it("prints the version on stdout", async () => {
    const res = await svc(["version"], { env: home.env });
    expect(res.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
