import { spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "./support/api-server.ts";
import { requireChromium } from "./support/browser.ts";
import { BIN, type CliEnv, cliHome, recordingBrowser, svc } from "./support/cli.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";

const ARTIFACTS = new URL("../test-artifacts/", import.meta.url).pathname;
const REPLY = "Hello from the agent, streamed into the page.";
const PREVIEW_APP = new URL("./fixtures/preview-app.mjs", import.meta.url).pathname;
const AGENT_ENTRY = "#transcript li.entry.assistant .markdown";
const USER_ENTRY = "#transcript li.entry.user .markdown";

/**
 * The session page and `svc login`'s browser half in a real Chromium, against a real sandbox running the real
 * opencode with a scripted model: the reply streams into the page as it does into `svc sessions chat`.
 */
describe("the dashboard's session page and the browser login (Chromium, real sandbox)", () => {
  let sandboxed: SandboxedProject;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let browser: Browser;
  let context: BrowserContext;
  let home: ReturnType<typeof cliHome>;
  let env: CliEnv;
  let sessionId: string;
  const run = (args: string[], extra: CliEnv = {}) => svc(args, { env: { ...env, ...extra }, cwd: home.dir });
  const pagePath = () => `/dashboard/projects/${sandboxed.project.id}/sessions/${sessionId}`;
  const shot = (page: Page, name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    llm = await startScriptedLlm([{ when: "Say hello", steps: [{ text: REPLY }] }]);
    sandboxed = await startSandboxedProject(
      "Dashboarded",
      { llm: { baseUrl: llm.url, apiKey: "test-key", model: "scripted" } },
      { background: true },
    );
    browser = await requireChromium();
    home = cliHome();
    env = { ...home.env, SVC_API_URL: `${sandboxed.api.url}/v1`, SVC_CLI_TOKEN: sandboxed.user.token };
    const created = await run(["sessions", "new", "--project", sandboxed.project.id]);
    expect(created.code, created.stderr).toBe(0);
    sessionId = created.stdout.trim();
    // Signed in the way `svc sessions open` does it: a one-time link from the user's token.
    const link = await call(sandboxed.api.url, "POST", "/v1/dashboard/sign-in-links", {
      token: sandboxed.user.token,
      body: { next: pagePath() },
    });
    expect(link.status).toBe(201);
    context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    await page.goto(link.body.url);
    await page.getByRole("button", { name: "Continue", exact: true }).click();
    await page.waitForURL(`**${pagePath()}`);
    await page.close();
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await sandboxed?.close();
    llm?.close();
  });

  it("streams the agent's reply into the page, timed against the CLI's chat in the same run", async () => {
    const page = await context.newPage();
    await page.goto(`${sandboxed.api.url}${pagePath()}`);
    await expect.poll(() => page.textContent("#agent-state"), { timeout: 60_000 }).toBe("ready");
    expect(await page.textContent("dl")).toContain("running");
    await page.getByLabel("Message").fill("Say hello, please.");
    const sent = Date.now();
    await page.getByRole("button", { name: "Send" }).click();
    await page.waitForSelector(AGENT_ENTRY, { timeout: 60_000 });
    const pageFirstToken = Date.now() - sent;
    await expect.poll(async () => (await page.textContent(AGENT_ENTRY))?.trim(), { timeout: 30_000 }).toBe(REPLY);
    expect((await page.textContent(USER_ENTRY))?.trim()).toBe("Say hello, please.");
    await expect.poll(() => page.textContent("#agent-state")).toBe("ready");
    await shot(page, "session-chat");

    // The CLI, same session, same model: time from start to the first byte of the reply on stdout.
    const cliStart = Date.now();
    const child = spawn(process.execPath, [BIN, "sessions", "chat", sessionId, "--prompt", "Say hello, please."], {
      env: { ...process.env, ...env } as Record<string, string>,
      cwd: home.dir,
    });
    const cliFirstToken = await new Promise<number>((resolve) =>
      child.stdout.once("data", () => resolve(Date.now() - cliStart)),
    );
    expect(await new Promise((resolve) => child.on("exit", resolve))).toBe(0);

    // Warm against warm: a second message from the page after the CLI's.
    await page.getByLabel("Message").fill("Say hello, please.");
    const again = Date.now();
    await page.getByRole("button", { name: "Send" }).click();
    await page.waitForSelector(`${AGENT_ENTRY} >> nth=1`, { timeout: 30_000 });
    const pageWarm = Date.now() - again;
    console.log(
      `first streamed token: session page ${pageFirstToken} ms (first prompt), ${pageWarm} ms (warm); ` +
        `svc sessions chat ${cliFirstToken} ms (warm, CLI start-up included)`,
    );

    // The page's forms refuse a post without this browser's CSRF token.
    const forged = await page.evaluate(async (url) => {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "rm -rf /" }),
      });
      return res.status;
    }, `${pagePath()}/messages`);
    expect(forged).toBe(403);

    // A reload shows the stored conversation, the CLI's turn included, in order.
    await page.reload();
    const said = async () =>
      page.$$eval("#transcript li.entry", (items) =>
        items.map(
          (li) =>
            `${li.classList.contains("user") ? "you" : "agent"}: ${li.querySelector(".markdown")?.textContent?.trim()}`,
        ),
      );
    await expect
      .poll(said, { timeout: 10_000 })
      .toEqual([
        "you: Say hello, please.",
        `agent: ${REPLY}`,
        "you: Say hello, please.",
        `agent: ${REPLY}`,
        "you: Say hello, please.",
        `agent: ${REPLY}`,
      ]);
    await page.close();
  }, 180_000);

  it("svc sessions open signs a browser in on the session page; an unknown session exits 1", async () => {
    const open = await run(["sessions", "open", sessionId, "--json"], { SVC_CLI_TOKEN: sandboxed.user.token });
    expect(open.code, open.stderr).toBe(0);
    const { url } = JSON.parse(open.stdout);
    const fresh = await browser.newContext();
    const page = await fresh.newPage();
    await page.goto(url);
    // The link asks first, naming where it leads.
    await expect(page.locator("main").textContent()).resolves.toContain(pagePath());
    await page.getByRole("button", { name: "Continue", exact: true }).click();
    await page.waitForURL(`**${pagePath()}`);
    await fresh.close();
    const unknown = await run(["sessions", "open", "00000000-0000-4000-8000-000000000000"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
  });

  it("Open preview leads to the sandbox's port on its own origin, under the page's policy, and waits for the app", async () => {
    const page = await context.newPage();
    const blocked: string[] = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) blocked.push(m.text());
    });
    await page.goto(`${sandboxed.api.url}${pagePath()}`);
    await page.getByRole("button", { name: "Open preview" }).click();
    await page.waitForURL((url) => url.hostname === `3000-${sessionId}.localhost`, { timeout: 15_000 });
    // Opened before the dev server listens: the page says so and tries again by itself.
    await expect(page.locator("body").textContent()).resolves.toContain("nothing is listening on port 3000");
    const [container] = await sandboxed.docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    const server = await sandboxed.docker.getContainer(container!.Id).exec({
      Cmd: ["/opt/svc/bin/node", "--input-type=module", "-e", readFileSync(PREVIEW_APP, "utf8")],
    });
    await server.start({ Detach: true });
    // The dev server's page, its module and its WebSocket, all on the preview's origin.
    await page.waitForFunction(() => document.querySelector("#out")?.textContent?.startsWith("module+"), undefined, {
      timeout: 30_000,
    });
    expect(blocked).toEqual([]);
    await page.close();
  }, 60_000);

  it("lists the CRs the session's agent opened, each linking back to the session", async () => {
    const opened = await run([
      "sessions",
      "exec",
      sessionId,
      "--",
      "sh",
      "-c",
      "echo linked > linked.txt && git add linked.txt && git commit -qm linked && git push -q origin HEAD && svc cr open --title 'From the session' --json",
    ]);
    expect(opened.code, opened.stderr).toBe(0);
    const { number } = JSON.parse(opened.stdout);
    const page = await context.newPage();
    await page.goto(`${sandboxed.api.url}${pagePath()}`);
    await page.getByRole("link", { name: `#${number} From the session` }).click();
    await page.waitForURL(`**/dashboard/projects/${sandboxed.project.id}/crs/${number}`);
    await page.getByRole("link", { name: sessionId.slice(0, 8) }).click();
    await page.waitForURL(`**${pagePath()}`);
    await page.close();
  }, 60_000);

  it("the project page starts a session from its form and fires a trigger from its row; a refused base comes back", async () => {
    const { project, user } = sandboxed;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.git(["reset", "-q", "--hard", "origin/main"]);
    await repo.commit("a trigger", {
      "svc.toml":
        '[[triggers]]\nslug = "nightly"\nschedule = "0 3 * * *"\nprompt = "Say hello"\n\n' +
        '[[apps]]\nname = "web"\ncommand = "node server.js"\nport = 8080\n',
    });
    await landOnDefault(sandboxed.api.url, user.token, project.id, repo, "a trigger");
    const projectPage = `${sandboxed.api.url}/dashboard/projects/${project.id}`;
    const started: string[] = [];
    const page = await context.newPage();
    const sessionPage = /\/dashboard\/projects\/[^/]+\/sessions\/([0-9a-f-]{36})$/;
    try {
      await page.goto(projectPage);
      // The manifest's apps are listed with their status (this stack deploys none: SVC_APP_PROVIDER=none).
      const apps = page.getByRole("region", { name: "Apps" });
      await expect(apps.getByRole("row").nth(1).innerText()).resolves.toMatch(/^web\s+disabled/);
      await page.getByLabel("Prompt (optional)").fill("Say hello, please.");
      await page.getByRole("button", { name: "New session" }).click();
      await page.waitForURL(sessionPage);
      started.push(sessionPage.exec(page.url())![1]!);
      expect(started[0]).not.toBe(sessionId);
      expect((await sandboxed.sessions(`/${started[0]}`)).body).toMatchObject({ base_ref: "main", trigger: null });

      await page.goto(projectPage);
      // A base the API refuses (the default branch in other case) comes back on the page, no session started.
      await page.getByLabel("Base branch").fill("MAIN");
      await page.getByRole("button", { name: "New session" }).click();
      await expect(page.getByRole("alert").textContent()).resolves.toContain("'MAIN' differs from the default branch");

      await page.goto(projectPage);
      await page.getByRole("button", { name: "Fire nightly" }).click();
      await page.waitForURL(sessionPage);
      started.push(sessionPage.exec(page.url())![1]!);
      expect((await sandboxed.sessions(`/${started[1]}`)).body.trigger).toBe("nightly");
      await expect(page.locator("main").textContent()).resolves.toContain("nightly");
    } finally {
      await page.close();
      for (const id of started) await sandboxed.sessions(`/${id}`, "DELETE");
    }
  }, 120_000);

  it("stops and restarts the session from the page", async () => {
    const page = await context.newPage();
    await page.goto(`${sandboxed.api.url}${pagePath()}`);
    await page.getByRole("button", { name: "Stop" }).click();
    await page.waitForURL(`**${pagePath()}`);
    expect(await page.textContent("dl")).toContain("stopped");
    expect(await page.getByRole("button", { name: "Stop" }).count()).toBe(0);
    const stopped = await sandboxed.sessions(`/${sessionId}`);
    expect(stopped.body.status).toBe("stopped");
    await shot(page, "session-stopped");
    await page.getByRole("button", { name: "Restart" }).click();
    await page.waitForURL(`**${pagePath()}`);
    expect(["provisioning", "running"]).toContain((await sandboxed.sessions(`/${sessionId}`)).body.status);
    await page.close();
  }, 120_000);

  it("svc login: the CLI opens $BROWSER, the signed-in page authorizes, and the CLI stores a working token", async () => {
    const opener = recordingBrowser(home.dir);
    const loginEnv = { ...process.env, ...home.env, SVC_CLI_TOKEN: "", BROWSER: opener.path } as Record<string, string>;
    const login = spawn(process.execPath, [BIN, "login", "--host", "dash", "--api", sandboxed.api.url], {
      env: loginEnv,
      cwd: home.dir,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    login.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((resolve) => login.on("exit", resolve));
    const url = await opener.opened();
    // The browser may open before the CLI's own line reaches this process.
    await expect.poll(() => stderr, { timeout: 5000 }).toContain(url);
    expect(url).toMatch(
      /\/dashboard\/cli\/login\?callback=http%3A%2F%2F127\.0\.0\.1%3A\d+%2Fcallback&state=[0-9a-f]{32}$/,
    );

    const page = await context.newPage();
    await page.goto(url);
    expect(await page.textContent("h1")).toBe(`Authorize svc CLI on ${new URL(sandboxed.api.url).host}`);
    await shot(page, "cli-login");
    await page.getByRole("button", { name: "Authorize" }).click();
    await page.waitForURL(/127\.0\.0\.1:\d+\/callback/);
    expect(await page.textContent("body")).toContain("logged in");
    expect(await exited, stderr).toBe(0);
    const whoami = await svc(["whoami", "--host", "dash"], { env: { ...home.env, SVC_CLI_TOKEN: "" }, cwd: home.dir });
    expect(whoami.code, whoami.stderr).toBe(0);
    expect(whoami.stdout).toMatch(/@example\.test/);

    // A link that would send the token anywhere but the CLI's loopback callback is refused.
    const evil = await page.goto(
      `${sandboxed.api.url}/dashboard/cli/login?callback=${encodeURIComponent("http://evil.example/callback")}&state=${"a".repeat(32)}`,
    );
    expect(evil?.status()).toBe(400);
    await page.close();
  }, 120_000);
});
