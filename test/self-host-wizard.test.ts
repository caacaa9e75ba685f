import { generateKeyPairSync } from "node:crypto";
import { chmodSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliEnv, cliHome, freePort, svc } from "./support/cli.ts";
import { svcPty } from "./support/pty.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";

const RIGHT_KEY = "sk-right-gateway-key-0123456789";
const WRONG_KEY = "sk-wrong-gateway-key-9876543210";
const SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_TOKEN = "xoxb-1234-5678-AbCdEfGhIjKl";
const REPO_TOKEN = "ghp_storedRepoAccessToken0123";

/** A person at a terminal: no CI, no opt-out, colours as they come. */
const atTerminal = (env: CliEnv): CliEnv => ({ ...env, CI: undefined, SVC_NO_WIZARD: undefined });

/** The questions a fresh home is asked, in order. */
const SKIP_ALL = [
  "provider (local/none) [local]: ",
  "access with (token/app/none) [none]: ",
  "provider (slack/none) [none]: ",
  "base URL (usually ending in /v1): ",
  "API key: ",
  "model: ",
];

const stateOf = (env: CliEnv) => {
  const path = join(env.SVC_HOME!, "selfhost.json");
  return { ...JSON.parse(readFileSync(path, "utf8")), path };
};

describe("svc self-host configure: the credential wizard on a terminal", () => {
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  const pemDir = cliHome().dir;
  const pemPath = join(pemDir, "app.private-key.pem");
  const pem = generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ type: "pkcs1", format: "pem" })
    .toString();

  beforeAll(async () => {
    llm = await startScriptedLlm([], "127.0.0.1", { apiKey: RIGHT_KEY, models: ["scripted-1"] });
    writeFileSync(pemPath, pem, { mode: 0o600 });
  });
  afterAll(() => llm?.close());

  it("asks for every integration and the model, refuses bad values with the reason, checks the gateway", async () => {
    const home = cliHome();
    const t = svcPty(["self-host", "configure"], { env: atTerminal(home.env) });
    await t.expect("Enter skips a question");
    await t.expect("provider (local/none) [local]: ");
    t.answer("kubernetes");
    await t.expect("✗ SVC_APP_PROVIDER must be one of its choices");
    await t.expect("provider (local/none) [local]: ");
    t.answer("local");

    await t.expect("access with (token/app/none) [none]: ");
    t.answer("app");
    await t.expect("GitHub App id: ");
    t.answer("my-app");
    await t.expect("✗ SVC_GITHUB_APP_ID must be a whole number");
    await t.expect("GitHub App id: ");
    t.answer("123456");
    await t.expect("installation id: ");
    t.answer("987654");
    await t.expect("private key file (.pem): ");
    t.answer(join(pemDir, "missing.pem"));
    await t.expect("cannot read");
    await t.expect("private key file (.pem): ");
    t.answer(pemPath);
    await t.expect("GitHub API URL [https://api.github.com]: ");
    t.answer();
    await t.expect("sent only to remotes under [https://github.com/]: ");
    t.answer();

    await t.expect("provider (slack/none) [none]: ");
    t.answer("slack");
    await t.expect("signing secret: ");
    t.answer(SLACK_SECRET);
    await t.expect("bot token (xoxb-…): ");
    t.answer("not-a-slack-token");
    await t.expect("✗ SVC_SLACK_BOT_TOKEN must be a secret: must be a Slack token");
    // As a person does: the answer after the question, which the terminal shows once echo is off.
    await t.expect("bot token (xoxb-…): ");
    t.answer(SLACK_TOKEN);
    await t.expect("Web API URL [https://slack.com/api]: ");
    t.answer();

    await t.expect("base URL (usually ending in /v1): ");
    t.answer("localhost:1234");
    await t.expect("✗ SVC_LLM_BASE_URL must be a URL");
    await t.expect("base URL (usually ending in /v1): ");
    t.answer(llm.url);
    await t.expect("API key: ");
    t.answer(WRONG_KEY);
    await t.expect("model: ");
    t.answer("scripted-1");
    await t.expect("✗ the model gateway refused the API key (HTTP 401: Incorrect API key provided)");
    await t.expect("(re-enter/keep) [re-enter]: ");
    t.answer();
    await t.expect(`base URL (usually ending in /v1) [${llm.url}]: `);
    t.answer();
    await t.expect("API key [sk-…*****]: ");
    t.answer(RIGHT_KEY);
    await t.expect("model [scripted-1]: ");
    t.answer();
    await t.expect(`✓ the model gateway at ${llm.url} answers with model 'scripted-1'`);
    await t.expect("✓ saved in");
    const { code, screen } = await t.exit();
    expect(code, screen).toBe(0);
    expect(screen).toContain("applied at the next 'svc self-host start'");
    // Secrets are typed without echo and never shown back.
    for (const secret of [RIGHT_KEY, WRONG_KEY, SLACK_SECRET, SLACK_TOKEN, "BEGIN RSA PRIVATE KEY"]) {
      expect(screen).not.toContain(secret);
    }

    const state = stateOf(home.env);
    expect(state.wizard_done).toBe(true);
    expect(state.env).toEqual({
      SVC_APP_PROVIDER: "local",
      SVC_GITHUB_APP_ID: "123456",
      SVC_GITHUB_APP_INSTALLATION_ID: "987654",
      SVC_GITHUB_APP_PRIVATE_KEY: pem,
      SVC_SLACK_SIGNING_SECRET: SLACK_SECRET,
      SVC_SLACK_BOT_TOKEN: SLACK_TOKEN,
      SVC_LLM_BASE_URL: llm.url,
      SVC_LLM_API_KEY: RIGHT_KEY,
      SVC_AGENT_MODEL: "scripted-1",
    });
    expect(statSync(state.path).mode & 0o777).toBe(0o600);
    expect(statSync(home.env.SVC_HOME!).mode & 0o777).toBe(0o700);

    // env ls shows every populated secret masked, the PEM included; the key names and plain values in full.
    const ls = await svc(["self-host", "env", "ls"], { env: home.env });
    expect(ls.code, ls.stderr).toBe(0);
    const row = (key: string) =>
      ls.stdout
        .split("\n")
        .find((l) => l.startsWith(`${key}\t`))
        ?.split("\t")[1];
    expect(row("SVC_GITHUB_APP_PRIVATE_KEY")).toBe("---…*****");
    expect(row("SVC_SLACK_SIGNING_SECRET")).toBe("8f7…*****");
    expect(row("SVC_SLACK_BOT_TOKEN")).toBe("xox…*****");
    expect(row("SVC_LLM_API_KEY")).toBe("sk-…*****");
    expect(row("SVC_GITHUB_APP_ID")).toBe("123456");
    expect(row("SVC_APP_PROVIDER")).toBe("local");
    const json = await svc(["self-host", "env", "ls", "--json"], { env: home.env });
    for (const secret of [RIGHT_KEY, SLACK_SECRET, SLACK_TOKEN, "PRIVATE KEY"]) {
      expect(ls.stdout + json.stdout).not.toContain(secret);
    }
  });

  it("keeps everything on Enter: nothing stored stays nothing, a stored value is shown masked and kept", async () => {
    const fresh = cliHome();
    const skip = svcPty(["self-host", "configure"], { env: atTerminal(fresh.env) });
    for (const question of SKIP_ALL) {
      await skip.expect(question);
      skip.answer();
    }
    await skip.expect("✓ saved in");
    expect((await skip.exit()).code).toBe(0);
    expect(stateOf(fresh.env)).toMatchObject({ env: {}, wizard_done: true });

    const home = cliHome();
    const set = await svc(
      ["self-host", "env", "set", `SVC_REPO_ACCESS_TOKEN=${REPO_TOKEN}`, `SVC_SLACK_BOT_TOKEN=${SLACK_TOKEN}`],
      { env: home.env },
    );
    expect(set.code, set.stderr).toBe(0);
    const before = stateOf(home.env).env;
    const keep = svcPty(["self-host", "configure"], { env: atTerminal(home.env) });
    await keep.expect("provider (local/none) [local]: ");
    keep.answer();
    await keep.expect("access with (token/app/none) [token]: ");
    keep.answer();
    await keep.expect("token [ghp…*****]: ");
    keep.answer();
    await keep.expect("sent only to remotes under [https://github.com/]: ");
    keep.answer();
    await keep.expect("provider (slack/none) [slack]: ");
    keep.answer();
    await keep.expect("signing secret: ");
    keep.answer();
    await keep.expect("bot token (xoxb-…) [xox…*****]: ");
    keep.answer();
    await keep.expect("Web API URL [https://slack.com/api]: ");
    keep.answer();
    for (const question of ["base URL (usually ending in /v1): ", "API key: ", "model: "]) {
      await keep.expect(question);
      keep.answer();
    }
    const kept = await keep.exit();
    expect(kept.code, kept.screen).toBe(0);
    expect(kept.screen).not.toContain(REPO_TOKEN);
    expect(stateOf(home.env).env).toEqual(before);
  });

  it("Ctrl-C stops with exit 1 and keeps the answers given so far; the wizard stays to be done", async () => {
    const home = cliHome();
    const t = svcPty(["self-host", "configure"], { env: atTerminal(home.env) });
    await t.expect("provider (local/none) [local]: ");
    t.answer("local");
    await t.expect("access with (token/app/none) [none]: ");
    t.answer("token");
    await t.expect("token: ");
    t.type("ghp_half");
    t.type("\u0003");
    const { code, screen } = await t.exit();
    expect(code).toBe(1);
    expect(screen).toContain("error: stopped; the answers given so far are saved in");
    expect(stateOf(home.env)).toMatchObject({ env: { SVC_APP_PROVIDER: "local" }, wizard_done: false });
  });

  it("off a terminal, configure exits 2 and points at env set", async () => {
    const home = cliHome();
    const piped = await svc(["self-host", "configure"], { env: home.env, input: "local\n" });
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain("svc self-host env set KEY=VALUE");
  });

  it("keeps selfhost.json owner-only (0600 in a 0700 home) when it was found wider", async () => {
    const home = cliHome();
    expect((await svc(["self-host", "env", "set", "SVC_SESSION_CAP=3"], { env: home.env })).code).toBe(0);
    const file = join(home.env.SVC_HOME!, "selfhost.json");
    const modes = () => [statSync(home.env.SVC_HOME!).mode & 0o777, statSync(file).mode & 0o777];
    expect(modes()).toEqual([0o700, 0o600]);
    chmodSync(home.env.SVC_HOME!, 0o755);
    chmodSync(file, 0o644);
    expect((await svc(["self-host", "env", "ls"], { env: home.env })).code).toBe(0);
    expect(modes()).toEqual([0o700, 0o600]);
    chmodSync(home.env.SVC_HOME!, 0o777);
    chmodSync(file, 0o666);
    expect((await svc(["self-host", "env", "set", "SVC_SESSION_CAP=4"], { env: home.env })).code).toBe(0);
    expect(modes()).toEqual([0o700, 0o600]);
  });
});

describe("the first interactive svc self-host start", () => {
  const home = cliHome();
  afterAll(() => svc(["self-host", "stop"], { env: home.env }));

  it("asks the wizard's questions before starting; later starts do not ask again", async () => {
    const port = await freePort();
    // Sessions are not what this test is about: the API alone starts faster.
    expect((await svc(["self-host", "env", "set", "SVC_ORCHESTRATOR=off"], { env: home.env })).code).toBe(0);
    const t = svcPty(["self-host", "start", "--port", String(port)], { env: atTerminal(home.env) });
    await t.expect("svc self-host asks about integrations");
    for (const question of SKIP_ALL) {
      await t.expect(question);
      t.answer(question.startsWith("provider (local") ? "local" : "");
    }
    await t.expect(`✓ svc self-host running at http://127.0.0.1:${port}`, 90_000);
    expect((await t.exit()).code).toBe(0);
    expect(stateOf(home.env)).toMatchObject({ env: { SVC_APP_PROVIDER: "local" }, wizard_done: true });

    // With the stack running, configure says what applies the answers.
    const running = svcPty(["self-host", "configure"], { env: atTerminal(home.env) });
    await running.expect("provider (local/none) [local]: ");
    running.answer("none");
    for (const question of SKIP_ALL.slice(1)) {
      await running.expect(question);
      running.answer();
    }
    await running.expect("the stack is running: 'svc self-host restart' applies the changes");
    expect((await running.exit()).code).toBe(0);

    expect((await svc(["self-host", "stop"], { env: home.env })).code).toBe(0);
    const again = svcPty(["self-host", "start"], { env: atTerminal(home.env) });
    await again.expect(`✓ svc self-host running at http://127.0.0.1:${port}`, 90_000);
    const { code, screen } = await again.exit();
    expect(code).toBe(0);
    expect(screen).not.toContain("asks about integrations");
  });

  it("--no-wizard starts without asking and leaves the wizard for a later start", async () => {
    const other = cliHome();
    const port = await freePort();
    await svc(["self-host", "env", "set", "SVC_ORCHESTRATOR=off"], { env: other.env });
    const t = svcPty(["self-host", "start", "--no-wizard", "--port", String(port)], { env: atTerminal(other.env) });
    try {
      await t.expect(`✓ svc self-host running at http://127.0.0.1:${port}`, 90_000);
      const { code, screen } = await t.exit();
      expect(code).toBe(0);
      expect(screen).not.toContain("asks about integrations");
      expect(stateOf(other.env).wizard_done).toBe(false);
    } finally {
      await svc(["self-host", "stop"], { env: other.env });
    }
  });
});
