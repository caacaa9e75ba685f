import { describe, expect, it } from "vitest";
import { parseManifest } from "./parse.ts";

const VALID = `# a manifest
[project]
name = "demo"
owner = "team-a"

[agent]
name = "build"

[env]
OPENAI_API_KEY = { required = true, description = "model key" }
SENTRY_DSN = "error reporting"

[[triggers]]
slug = "nightly-deps"
schedule = "0 3 * * *"
timezone = "Europe/Berlin"
prompt = "Update dependencies."

[[triggers]]
slug = "every-30s"
schedule = "*/30 * * * * *"
prompt = """
Check the build.
"""
enabled = false
base_ref = "develop"
agent = "plan"

[[apps]]
name = "web"
command = "npm start"
port = 3000
env = ["OPENAI_API_KEY"]
health_path = "/health"
`;

function errorOf(text: string) {
  const result = parseManifest(text);
  if (!("error" in result)) throw new Error("expected an error");
  return result.error;
}

describe("parseManifest", () => {
  it("parses a full manifest with defaults filled in", () => {
    const result = parseManifest(VALID);
    if (!("manifest" in result)) throw new Error(result.error.message);
    const m = result.manifest;
    expect(m.project).toEqual({ name: "demo", owner: "team-a" });
    expect(m.agent).toEqual({ name: "build", config_dir: ".svc/agent" });
    expect(m.env).toEqual({
      OPENAI_API_KEY: { required: true, description: "model key" },
      SENTRY_DSN: { required: false, description: "error reporting" },
    });
    expect(m.triggers).toEqual([
      {
        slug: "nightly-deps",
        schedule: "0 3 * * *",
        timezone: "Europe/Berlin",
        prompt: "Update dependencies.",
        enabled: true,
      },
      {
        slug: "every-30s",
        schedule: "*/30 * * * * *",
        prompt: "Check the build.\n",
        enabled: false,
        base_ref: "develop",
        agent: "plan",
      },
    ]);
    expect(m.apps).toEqual([
      {
        name: "web",
        build: ".svc/Dockerfile",
        context: ".",
        command: "npm start",
        port: 3000,
        env: ["OPENAI_API_KEY"],
        health_path: "/health",
      },
    ]);
  });

  it("checks [[apps]] strictly: a hostname-safe name, a port, known keys", () => {
    const app = (body: string) => errorOf(`[[apps]]\n${body}\n`);
    for (const name of ["Web", "-web", "web-", "a--b", "x".repeat(25)])
      expect(app(`name = "${name}"\nport = 80`).key, name).toBe("apps[0].name");
    expect(app('name = "web"').key).toBe("apps[0].port");
    expect(app('name = "web"\nport = 80\nimage = "x"').message).toContain("image");
    expect(app('name = "web"\nport = 80\nbuild = "../x"').key).toBe("apps[0].build");
  });

  it("gives the empty default for an empty file", () => {
    expect(parseManifest("")).toEqual({
      manifest: {
        project: {},
        agent: { config_dir: ".svc/agent" },
        sandbox: {},
        env: {},
        triggers: [],
        apps: [],
        checks: [],
        review: { fix_checks: false, max_fix_rounds: 3, required_approvals: 0 },
      },
    });
  });

  it("reports a TOML syntax error with its line", () => {
    const error = errorOf('[project]\nname = "x"\n\n[env]\nA = = 1\n');
    expect(error).toMatchObject({ line: 5, key: null });
    expect(error.message).toMatch(/^svc\.toml \(line 5\): invalid TOML: /);
  });

  it("reports a bad schedule with its key and line", () => {
    const error = errorOf(VALID.replace('schedule = "0 3 * * *"', 'schedule = "0 3 * *"'));
    expect(error).toMatchObject({ key: "triggers[0].schedule", line: 15 });
    expect(error.message).toContain("4 fields");
    const chars = errorOf(VALID.replace('"*/30 * * * * *"', '"*/30 * * * * $(x)"'));
    expect(chars).toMatchObject({ key: "triggers[1].schedule", line: 21 });
  });

  it("refuses a duplicate slug at the second one", () => {
    const error = errorOf(VALID.replace('slug = "every-30s"', 'slug = "nightly-deps"'));
    expect(error).toMatchObject({ key: "triggers[1].slug", line: 20 });
    expect(error.message).toContain("duplicate trigger slug 'nightly-deps'");
  });

  it("flags SVC_ names in [env]", () => {
    const error = errorOf(`${VALID}`.replace("SENTRY_DSN =", "SVC_TOKEN ="));
    expect(error).toMatchObject({ key: "env.SVC_TOKEN", line: 11 });
    expect(error.message).toContain("reserved");
  });

  it("refuses an unknown time zone", () => {
    const error = errorOf(VALID.replace("Europe/Berlin", "Mars/Olympus"));
    expect(error).toMatchObject({ key: "triggers[0].timezone", line: 16 });
    expect(error.message).toContain("unknown time zone");
  });

  it("defaults enabled to true and checks slugs, base_ref and unknown keys", () => {
    const one = (body: string) => parseManifest(`[[triggers]]\n${body}`);
    const ok = one('slug = "a"\nschedule = "* * * * *"\nprompt = "p"\n');
    expect(ok).toMatchObject({ manifest: { triggers: [{ slug: "a", enabled: true }] } });
    expect(one('slug = "Bad_Slug"\nschedule = "* * * * *"\nprompt = "p"\n')).toMatchObject({
      error: { key: "triggers[0].slug", line: 2 },
    });
    expect(one('slug = "a"\nschedule = "* * * * *"\nprompt = "p"\nbase_ref = "a..b"\n')).toMatchObject({
      error: { key: "triggers[0].base_ref", line: 5 },
    });
    expect(one('slug = "a"\nschedul = "* * * * *"\nprompt = "p"\n')).toMatchObject({
      error: { key: "triggers[0].schedule", line: 1 },
    });
    expect(one('slug = "a"\nschedule = "* * * * *"\nprompt = "p"\nenable = false\n')).toMatchObject({
      error: { key: "triggers[0].enable", line: 5 },
    });
  });

  it("reads [sandbox] egress: names, '*.' domains, IPv4 addresses, ports; anything else at its line", () => {
    const egress = (list: string) => parseManifest(`[sandbox]\negress = ${list}\n`);
    expect(egress('["Registry.npmjs.org", "*.pypi.org:443", "10.0.0.5:8080", "allowed.localhost:9000"]')).toEqual({
      manifest: expect.objectContaining({
        sandbox: { egress: ["registry.npmjs.org", "*.pypi.org:443", "10.0.0.5:8080", "allowed.localhost:9000"] },
      }),
    });
    expect(egress("[]")).toMatchObject({ manifest: { sandbox: { egress: [] } } });
    expect(parseManifest("[sandbox]\n")).toMatchObject({ manifest: { sandbox: {} } });
    for (const bad of ["*", "*.", "https://example.com", "exa mple.com", "example.com:0", "[::1]:80", "*.10.0.0.1"]) {
      expect(egress(JSON.stringify([bad])), bad).toMatchObject({ error: { key: "sandbox.egress[0]", line: 2 } });
    }
  });

  it("reads [[checks]] and [review]; a check without run, a timeout of 0 or a duplicate name is refused at its line", () => {
    const good = parseManifest('[[checks]]\nname = "unit"\nrun = "npm test"\n\n[review]\nfix_checks = true\n');
    expect(good).toMatchObject({
      manifest: {
        checks: [{ name: "unit", run: "npm test", timeout: 600 }],
        review: { fix_checks: true, max_fix_rounds: 3, required_approvals: 0 },
      },
    });
    expect(errorOf('[[checks]]\nname = "unit"\n')).toMatchObject({ key: "checks[0].run" });
    expect(errorOf('[[checks]]\nname = "unit"\nrun = "  "\n').message).toContain("give the command the check runs");
    expect(errorOf('[[checks]]\nname = "unit"\nrun = "x"\ntimeout = 0\n')).toMatchObject({
      key: "checks[0].timeout",
      line: 4,
    });
    expect(errorOf('[[checks]]\nname = "a"\nrun = "x"\n[[checks]]\nname = "a"\nrun = "y"\n').message).toContain(
      "duplicate check name 'a'",
    );
  });

  it("reads [review] required_approvals: a whole number from 0 up; anything else is refused at its line", () => {
    expect(parseManifest("[review]\nrequired_approvals = 2\n")).toMatchObject({
      manifest: { review: { required_approvals: 2 } },
    });
    expect(parseManifest("[review]\nrequired_approvals = 0\n")).toMatchObject({
      manifest: { review: { required_approvals: 0 } },
    });
    for (const bad of ["-1", "1.5", '"2"', "true", "21"]) {
      expect(errorOf(`[project]\nname = "x"\n\n[review]\nrequired_approvals = ${bad}\n`), bad).toMatchObject({
        key: "review.required_approvals",
        line: 5,
      });
    }
    expect(errorOf("[review]\nrequired_approvals = -1\n").message).toContain("0 or more approvals");
  });
});
