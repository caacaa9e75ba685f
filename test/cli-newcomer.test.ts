import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../api/app.ts";
import { git } from "../api/git/run.ts";
import { createCipher } from "../api/secrets/cipher.ts";
import type { Services } from "../api/services.ts";
import { SANDBOX_SERVICE_KEY_CONTEXT } from "../api/sessions/service.ts";
import { MODEL_SETUP_COMMAND } from "../protocol/env.ts";
import { seedUser } from "./support/api-server.ts";
import { type CliEnv, cliHome, freePort, newGitApp, svc } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { GIT_ENV } from "./support/git-fixture.ts";
import { noSandboxes, settings } from "./support/no-sandboxes.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";

const listen = async (server: Server) => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};
const close = (server: Server | undefined) =>
  new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));

/**
 * What a person new to svc runs into first (issue 30): each refusal names the flag, file or command that fixes it.
 * The real svc binary against the real API on PGlite, with a session service over a driver that runs no sandbox
 * (a session with a live sandbox is written as the orchestrator would) and a secrets key this suite knows, so it
 * can seal that sandbox's service key.
 */
describe("a newcomer's mistakes name their fix (real svc binary, real API)", () => {
  let db: TestDatabase;
  let app: FastifyInstance;
  let services: Services;
  let url = "";
  let user: Awaited<ReturnType<typeof seedUser>>;
  let env: CliEnv;
  let repo: string;
  let projectId: string;
  const secretsKey = randomBytes(32).toString("base64");

  const sh = (cwd: string, cmd: string) => execa("bash", ["-c", cmd], { cwd, env: GIT_ENV });
  const run = (args: string[], opts: { cwd?: string; env?: CliEnv } = {}) =>
    svc(args, { cwd: opts.cwd ?? repo, env: { ...env, ...opts.env } });
  const bare = () => services.repos.managedDir(projectId);
  const remoteBranches = async () =>
    (await git(["for-each-ref", "--format=%(refname:short)", "refs/heads"], { dir: bare() })).stdout
      .split("\n")
      .filter(Boolean);

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    const built = await buildApp({
      sql: db.sql,
      dataDir: mkdtempSync(join(tmpdir(), "svc-api-")),
      publicUrl: () => url,
      logLevel: "silent",
      secretsKey,
      // One session at a time: the live session seeded below fills the account's cap.
      orchestrator: {
        driver: noSandboxes,
        settings: { ...settings, sessionCap: 1 },
        root: process.cwd(),
        baseImage: "none",
      },
    });
    app = built.app;
    services = built.services;
    await app.listen({ port: 0, host: "127.0.0.1" });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    user = await seedUser(services, "newcomer");
    env = { ...cliHome().env, BROWSER: undefined };
    repo = join(mkdtempSync(join(tmpdir(), "svc-newcomer-")), "app");
    await newGitApp(repo);
    const login = await run(["login", "--token", user.token, "--api", url, "--host", "mine"]);
    expect(login.code, login.stderr).toBe(0);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it("svc ship checks svc.toml with the API's schema first: the key and line named, nothing created or pushed", async () => {
    writeFileSync(
      join(repo, "svc.toml"),
      '[project]\nname = "app"\n\n[[triggers]]\nslug = "nightly"\nschedule = "0 3 *"\nprompt = "go"\n',
    );
    await sh(repo, "git add -A && git commit -qm manifest");
    const refused = await run(["ship"]);
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr).toContain("nothing shipped: svc.toml (line 6, triggers[0].schedule):");
    expect(refused.stderr).toContain("a cron schedule has 5");
    // Nothing created: no project, no link, no remote.
    expect(existsSync(join(repo, ".svc", "link.json"))).toBe(false);
    expect(JSON.parse((await run(["projects", "ls", "--json"])).stdout)).toEqual([]);

    writeFileSync(
      join(repo, "svc.toml"),
      '[project]\nname = "app"\n\n[[triggers]]\nslug = "nightly"\nschedule = "0 3 * * *"\nprompt = "go"\n',
    );
    await sh(repo, "git add -A && git commit -qm 'fix the schedule'");
    const shipped = await run(["ship"]);
    expect(shipped.code, shipped.stderr).toBe(0);
    projectId = shipped.stdout.trim();

    // A branch with a broken manifest is not pushed either: the API would read it once it merged.
    await sh(repo, "git checkout -qb broken && printf '[[apps]]\\nname = \"Web\"\\nport = 3000\\n' >> svc.toml");
    await sh(repo, "git commit -qam 'an app'");
    const branch = await run(["ship"]);
    expect(branch.code).toBe(1);
    expect(branch.stderr).toMatch(/nothing shipped: svc\.toml \(line 9, apps\[0\]\.name\): lowercase letters/);
    expect(await remoteBranches()).toEqual(["main"]);
    await sh(repo, "git checkout -q main");
  });

  it("svc cr open takes the checked-out branch once it is pushed, and otherwise names --head", async () => {
    await sh(repo, "git checkout -qb feature && echo feature > feature.txt && git add -A && git commit -qm feature");
    const unpushed = await run(["cr", "open", "--title", "Feature"]);
    expect(unpushed.code).toBe(2);
    expect(unpushed.stderr).toContain("--head <branch> is required here: feature, checked out here, is not pushed");

    expect((await run(["ship"])).code).toBe(0);
    const opened = await run(["cr", "open", "--title", "Feature", "--json"]);
    expect(opened.code, opened.stderr).toBe(0);
    expect(JSON.parse(opened.stdout)).toMatchObject({ head_ref: "feature", base_ref: "main", status: "open" });
    expect(opened.stderr).toContain("head: feature (checked out here, pushed to the 'svc' remote)");
    expect(opened.stderr).not.toContain("warning:");

    // Commits not pushed yet: the CR is opened on what the project has, and the person is told.
    await sh(repo, "git checkout -qb second && git commit -q --allow-empty -m one");
    expect((await run(["ship"])).code).toBe(0);
    await sh(repo, "git commit -q --allow-empty -m two");
    const behind = await run(["cr", "open", "--title", "Second"]);
    expect(behind.code, behind.stderr).toBe(0);
    expect(behind.stderr).toMatch(/warning: second here differs from the pushed second \([0-9a-f]{12}\)/);

    // The default branch is the base itself; a checkout that is not linked has no branch to offer.
    await sh(repo, "git checkout -q main");
    const onBase = await run(["cr", "open", "--title", "Main"]);
    expect(onBase.code).toBe(2);
    expect(onBase.stderr).toContain("--head <branch> is required here: main, checked out here, is the base itself");
    const elsewhere = mkdtempSync(join(tmpdir(), "svc-unlinked-"));
    const unlinked = await run(["cr", "open", "--title", "x", "--project", projectId], { cwd: elsewhere });
    expect(unlinked.code).toBe(2);
    expect(unlinked.stderr).toContain("--head <branch> is required here");
  });

  it("svc cr open's --base and --head say they take branches, not commits", async () => {
    const help = await run(["cr", "open", "--help"]);
    expect(help.stdout).toContain("--base <branch>");
    expect(help.stdout).toContain("--head <branch>");
    expect(help.stdout).not.toContain("<ref>");
    const sha = (await sh(repo, "git rev-parse main")).stdout.trim();
    const byCommit = await run(["cr", "open", "--title", "x", "--head", "feature", "--base", sha]);
    expect(byCommit.code).toBe(1);
    expect(byCommit.stderr).toContain(
      `branch '${sha}' does not exist (BRANCH_NOT_FOUND, HTTP 400); --base takes the name of a branch pushed to the project`,
    );
  });

  it("svc env push reads ./.env when --from is not given, says so, and never wipes a secret with a skeleton line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-dotenv-"));
    expect((await run(["projects", "link", projectId], { cwd: dir })).code).toBe(0);
    const missing = await run(["env", "push"], { cwd: dir });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no .env in ${dir}: name the dotenv file with --from <path>`);
    const named = await run(["env", "push", "--from", "nope.env"], { cwd: dir });
    expect(named.code).toBe(1);
    expect(named.stderr).toContain("nope.env not found");

    writeFileSync(join(dir, ".env"), "export API_KEY='s3cret'\nREGION=eu # where\n");
    const pushed = await run(["env", "push"], { cwd: dir });
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stderr).toContain("reading .env");
    expect(pushed.stderr).toContain("✓ pushed 2 secrets from .env");
    expect((await services.secrets.values(projectId)).values).toMatchObject({ API_KEY: "s3cret", REGION: "eu" });

    // `env pull` then `env push`: the skeleton's empty lines keep what is stored; a new empty name is pushed.
    expect((await run(["env", "pull", "--force"], { cwd: dir })).code).toBe(0);
    writeFileSync(join(dir, ".env"), "API_KEY=\nREGION=us\nEMPTY=\n");
    const again = await run(["env", "push", "--json"], { cwd: dir });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ names: ["EMPTY", "REGION"], kept: ["API_KEY"] });
    expect(again.stderr).toContain("warning: kept API_KEY: empty in .env but set on the project");
    expect((await services.secrets.values(projectId)).values).toMatchObject({
      API_KEY: "s3cret",
      REGION: "us",
      EMPTY: "",
    });
  });

  describe("with a session whose sandbox has no model", () => {
    let daemon: Server;
    let sessionId: string;

    beforeAll(async () => {
      // The sandbox's daemon, as it answers a prompt when no model gateway reached it.
      daemon = createServer((req, res) => {
        req.resume();
        res.writeHead(503, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: "no model gateway is configured", code: "MODEL_NOT_CONFIGURED" }));
      });
      const daemonUrl = await listen(daemon);
      const live = await seedLiveSandbox(db.sql, user, projectId);
      sessionId = live.sessionId;
      const sealed = createCipher(secretsKey).encrypt(live.serviceKey, SANDBOX_SERVICE_KEY_CONTEXT);
      await db.sql.query("update project_sessions set status = 'running' where session_id = $1", [sessionId]);
      await db.sql.query("update session_sandboxes set url = $2, service_key_enc = $3 where sandbox_id = $1", [
        live.sandboxId,
        daemonUrl,
        sealed,
      ]);
    });
    afterAll(() => close(daemon));

    it("the session cap's refusal names svc sessions ls and svc sessions stop", async () => {
      const refused = await run(["sessions", "new"]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("(SESSION_CAP_REACHED, HTTP 429)");
      expect(refused.stderr).toContain("list them with 'svc sessions ls'");
      expect(refused.stderr).toContain("'svc sessions stop <id>'");
    });

    it("the dashboard answers a message with a page naming the commands that set a model", async () => {
      const link = await run(["sessions", "open", sessionId]);
      expect(link.code, link.stderr).toBe(0);
      const confirm = await (await fetch(link.stdout.trim())).text();
      const field = (html: string, name: string) =>
        new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1]?.replaceAll("&#39;", "'") ?? "";
      const signIn = await fetch(`${url}/dashboard/sign-in`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ code: field(confirm, "code"), next: field(confirm, "next") }),
      });
      expect(signIn.status).toBe(303);
      const cookie = signIn.headers.getSetCookie()[0]!.split(";")[0]!;
      const pagePath = `/dashboard/projects/${projectId}/sessions/${sessionId}`;
      const page = await (await fetch(`${url}${pagePath}`, { headers: { cookie } })).text();
      const csrf = field(page, "_csrf");
      expect(csrf).not.toBe("");

      // A browser without the page's script posts the form and gets the page.
      const form = await fetch(`${url}${pagePath}/messages`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ _csrf: csrf, text: "hello" }),
      });
      expect(form.status).toBe(503);
      expect(form.headers.get("content-type")).toContain("text/html");
      const html = await form.text();
      expect(html).toContain("<h1>No model configured</h1>");
      expect(html).toContain(MODEL_SETUP_COMMAND);
      expect(html).toContain("svc self-host restart");
      expect(html).toContain("svc secrets set SVC_LLM_BASE_URL=");
      expect(html).not.toContain("Service Unavailable");

      // The page's script posts JSON and shows the answer's `error`: the message itself, not a status text.
      const scripted = await fetch(`${url}${pagePath}/messages`, {
        method: "POST",
        headers: { cookie, "content-type": "application/json" },
        body: JSON.stringify({ _csrf: csrf, text: "hello" }),
      });
      expect(scripted.status).toBe(503);
      const answer = await scripted.json();
      expect(answer).toMatchObject({ code: "MODEL_NOT_CONFIGURED" });
      expect(answer.error).toContain("svc self-host env set SVC_LLM_BASE_URL=");
    });
  });

  describe("svc self-host env set", () => {
    let engine: Server;
    let engineUrl: string;

    beforeAll(async () => {
      // A Docker engine with one running container of the home's compose project: a compose-mode stack that runs.
      engine = createServer((req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        const compose = /com\.docker\.compose\.project=([\w-]+)/.exec(decodeURIComponent(req.url ?? ""))?.[1];
        res.end(
          JSON.stringify([
            {
              Names: ["/svc-api-1"],
              State: "running",
              Status: "Up 2 minutes (healthy)",
              Labels: { "com.docker.compose.project": compose, "com.docker.compose.service": "api" },
            },
          ]),
        );
      });
      engineUrl = (await listen(engine)).replace("http:", "tcp:");
    });
    afterAll(() => close(engine));

    it("of a gateway setting says 'svc self-host restart' applies it while the stack runs, in either mode", async () => {
      const home = cliHome().env;
      const nothingThere = `tcp://127.0.0.1:${await freePort()}`;
      const stopped = await svc(["self-host", "env", "set", "SVC_AGENT_MODEL=m1"], {
        env: { ...home, DOCKER_HOST: nothingThere },
      });
      expect(stopped.code, stopped.stderr).toBe(0);
      expect(stopped.stderr).toBe("✓ saved SVC_AGENT_MODEL; applied at the next 'svc self-host start'");

      // Compose mode: the stack is its containers, no process of ours.
      const compose = await svc(["self-host", "env", "set", "SVC_LLM_BASE_URL=http://127.0.0.1:9/v1", "--json"], {
        env: { ...home, DOCKER_HOST: engineUrl },
      });
      expect(compose.code, compose.stderr).toBe(0);
      expect(JSON.parse(compose.stdout)).toMatchObject({ saved: ["SVC_LLM_BASE_URL"], restart_needed: true });
      expect(compose.stderr).toBe("✓ saved SVC_LLM_BASE_URL; run 'svc self-host restart' to apply");

      // Embedded mode: the API's process (this one stands in for it).
      mkdirSync(join(home.SVC_HOME!, "run"), { recursive: true });
      writeFileSync(join(home.SVC_HOME!, "run", "api.pid"), `${process.pid}\n`);
      const embedded = await svc(["self-host", "env", "set", "SVC_LLM_API_KEY=sk-test"], {
        env: { ...home, DOCKER_HOST: nothingThere },
      });
      expect(embedded.code, embedded.stderr).toBe(0);
      expect(embedded.stderr).toBe("✓ saved SVC_LLM_API_KEY; run 'svc self-host restart' to apply");
    });
  });
});
