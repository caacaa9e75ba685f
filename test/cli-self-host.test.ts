import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "./support/api-server.ts";
import { cliHome, freePort, svc } from "./support/cli.ts";

describe("svc self-host (embedded mode, the real CLI binary)", () => {
  const home = cliHome();
  let port: number;

  const storedConfig = () => JSON.parse(readFileSync(home.env.SVC_CONFIG_FILE!, "utf8"));

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

  it("is a no-op that says so when already running", async () => {
    const again = await svc(["self-host", "start"], { env: home.env });
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/already running/);
  });

  it("keeps data and the admin token across stop and start", async () => {
    const { url, token } = storedConfig().hosts.selfhost;
    const created = await call(url, "POST", "/v1/projects", { token, body: { name: "Survivor" } });
    expect(created.status).toBe(201);

    const stop = await svc(["self-host", "stop"], { env: home.env });
    expect(stop.code).toBe(0);
    await expect(fetch(`${url}/v1/health`)).rejects.toThrow();
    expect((await svc(["self-host", "stop"], { env: home.env })).stderr).toMatch(/not running/);

    const start = await svc(["self-host", "start"], { env: home.env });
    expect(start.code, start.stderr).toBe(0);
    expect(storedConfig().hosts.selfhost.token).toBe(token);
    const list = await call(url, "GET", "/v1/projects", { token });
    expect(list.status).toBe(200);
    expect(list.body.projects.map((p: { id: string }) => p.id)).toContain(created.body.id);
  });

  it("shows the stack's logs without leaking the admin token", async () => {
    const logs = await svc(["self-host", "logs", "api", "-n", "50"], { env: home.env });
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(/Server listening/);
    expect(logs.stdout).not.toContain(storedConfig().hosts.selfhost.token);
    expect((await svc(["self-host", "logs", "nope"], { env: home.env })).code).toBe(1);
  });

  it("persists env values and masks secrets in the listing", async () => {
    const set = await svc(["self-host", "env", "set", "SVC_LLM_API_KEY=sk-verysecretvalue", "SVC_AGENT_MODEL=m1"], {
      env: home.env,
    });
    expect(set.code).toBe(0);
    const ls = await svc(["self-host", "env", "ls"], { env: home.env });
    expect(ls.stdout).toContain("SVC_AGENT_MODEL=m1");
    expect(ls.stdout).not.toContain("verysecretvalue");
    const bare = await svc(["self-host", "env", "set", "sk-bare-secret-value"], { env: home.env });
    expect(bare.code).toBe(2);
    expect(bare.stderr + bare.stdout).not.toContain("sk-bare-secret-value");
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
