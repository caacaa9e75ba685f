import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { requireChromium } from "./support/browser.ts";
import { cliHome, recordingBrowser, svc, svcTty } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";

const ARTIFACTS = new URL("../test-artifacts/dashboard/", import.meta.url).pathname;
const BIG_DIFF_LINES = 5000;

describe("the dashboard: sign-in by link, projects, CR pages with merge, close and reopen (real CLI, Chromium)", () => {
  const home = cliHome();
  let db: TestDatabase;
  let api: TestApi;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  let work: WorkRepo;
  const crs: Record<"feature" | "closable" | "big" | "conflicted", number> = {
    feature: 0,
    closable: 0,
    big: 0,
    conflicted: 0,
  };
  const run = (args: string[], env: Record<string, string | undefined> = {}) =>
    svc(args, { env: { ...home.env, ...env } });
  const rest = (method: string, path: string, body?: unknown) =>
    call(api.url, method, path, { token: user.token, body });
  const crPage = (n: number) => `${api.url}/dashboard/projects/${projectId}/crs/${n}`;
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  /** A branch off main with one commit of `files`, pushed, and its CR opened; returns the CR's number. */
  async function openCr(name: string, files: Record<string, string>): Promise<number> {
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(name, { create: true, from: "origin/main" });
    await work.commit(`work on ${name}`, files);
    await work.pushed(name);
    const created = await rest("POST", `/v1/projects/${projectId}/change-requests`, {
      title: `CR ${name}`,
      head_ref: name,
    });
    expect(created.status).toBe(201);
    return created.body.number;
  }

  beforeAll(async () => {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await requireChromium();
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const created = await rest("POST", "/v1/projects", { name: "Dashboard <demo>" });
    projectId = created.body.id;
    work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("initial", {
      "README.md": "hello\n",
      "conflict.txt": "one\ntwo\nthree\n",
      "svc.toml":
        '[env]\nAPI_KEY = { required = true, description = "the model key" }\nSENTRY_DSN = "errors"\n\n[[triggers]]\nslug = "nightly"\nschedule = "0 3 * * *"\nprompt = "tidy up"\n',
    });
    await work.pushed("main");
    expect(
      (await rest("PUT", `/v1/projects/${projectId}/secrets`, { secrets: { SENTRY_DSN: "https://x" } })).status,
    ).toBe(200);
    crs.feature = await openCr("feature", { "feature.txt": "a new feature\n", "README.md": "hello\nand more\n" });
    crs.closable = await openCr("closable", { "maybe.txt": "perhaps\n" });
    crs.big = await openCr("big", {
      "big.txt": Array.from({ length: BIG_DIFF_LINES }, (_, i) => `line ${i} <tag> & "quotes"\n`).join(""),
    });
    crs.conflicted = await openCr("conflicted", { "conflict.txt": "one\nTWO from the branch\nthree\n" });
    // main moves on the same line: the conflicted CR now conflicts, the others merge with a commit.
    await work.checkout("main");
    await work.commit("main moves", { "conflict.txt": "one\nTWO from main\nthree\n" });
    await work.git(["push", "-q", api.services.repos.managedDir(projectId), "main"]);

    const login = await run(["login", "--token", user.token, "--api", api.url, "--host", "mine"]);
    expect(login.code, login.stderr).toBe(0);
    context = await browser.newContext();
    page = await context.newPage();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await api?.close();
    await db?.drop();
  });

  it("svc projects open prints a sign-in link; at a terminal it also runs $BROWSER with it", async () => {
    const printed = await run(["projects", "open", projectId]);
    expect(printed.code, printed.stderr).toBe(0);
    const url = new URL(printed.stdout.trim());
    expect(url.origin).toBe(api.url);
    expect(url.pathname).toBe("/dashboard/sign-in");
    expect(url.searchParams.get("next")).toBe(`/dashboard/projects/${projectId}`);
    expect(url.searchParams.get("code")).toMatch(/^svc_dsc_/);
    const json = JSON.parse((await run(["projects", "open", projectId, "--json"])).stdout);
    expect(Object.keys(json)).toEqual(["url"]);

    const opener = recordingBrowser(home.dir);
    const tty = await svcTty(["projects", "open", projectId], { env: { ...home.env, BROWSER: opener.path } });
    expect(tty.code, tty.output).toBe(0);
    const ttyUrl = tty.output
      .split(/\r?\n/)
      .find((l) => l.startsWith("http"))!
      .trim();
    expect(await opener.opened()).toBe(ttyUrl);

    // An unknown project fails before anything is opened.
    const unknown = await svcTty(["projects", "open", "00000000-0000-4000-8000-000000000000"], {
      env: { ...home.env, BROWSER: opener.path },
    });
    expect(unknown.code).toBe(1);
    expect(unknown.output).toContain("PROJECT_NOT_FOUND");
    // (This server has no sandbox driver: every session lookup fails, as an unknown one would elsewhere.)
    const missingSession = await svcTty(["sessions", "open", "no-such-session"], {
      env: { ...home.env, BROWSER: opener.path },
    });
    expect(missingSession.code).toBe(1);
    expect(missingSession.output).not.toContain("http");
    expect(opener.urls()).toHaveLength(1);

    // A project token never signs a browser in: a browser session is a person's.
    const minted = await rest("POST", `/v1/projects/${projectId}/cli-token`, {});
    const refused = await call(api.url, "POST", "/v1/dashboard/sign-in-links", {
      token: minted.body.token,
      body: { next: "/dashboard" },
    });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");
    const elsewhere = await rest("POST", "/v1/dashboard/sign-in-links", { next: "//evil.example/dashboard" });
    expect(elsewhere.status).toBe(400);

    // The link asks before it signs the browser in: who, to which account, where to; no cookie until Continue.
    const asked = await page.goto(printed.stdout.trim());
    expect(asked!.status()).toBe(200);
    expect(asked!.headers()["content-security-policy"]).toContain("default-src 'self'");
    expect(asked!.headers()["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(asked!.headers()["x-frame-options"]).toBe("DENY");
    const me = (await rest("GET", "/v1/accounts/me")).body;
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe(
      `Sign in as ${me.user.email} to ${me.account.name}?`,
    );
    await expect(page.locator("main").textContent()).resolves.toContain(`/dashboard/projects/${projectId}`);
    expect(await context.cookies()).toEqual([]);
    await shot("sign-in-confirm");
    await page.getByRole("button", { name: "Continue", exact: true }).click();
    await page.waitForURL(`${api.url}/dashboard/projects/${projectId}`);
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: "svc_dashboard", httpOnly: true, sameSite: "Strict", path: "/dashboard" });
    expect(cookie!.domain).toBe("127.0.0.1");
    await shot("project");
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toContain("Dashboard <demo>");
    const secrets = page.locator("section", { has: page.getByRole("heading", { name: "Secrets" }) });
    await expect(secrets.locator("li", { hasText: "API_KEY" }).textContent()).resolves.toContain("required, missing");
    await expect(secrets.locator("li", { hasText: "SENTRY_DSN" }).textContent()).resolves.not.toContain("missing");
    const triggers = page.locator("section", { has: page.getByRole("heading", { name: "Triggers" }) });
    await expect(triggers.textContent()).resolves.toContain("0 3 * * *");
    const crList = page.locator("section", { has: page.getByRole("heading", { name: "Change requests" }) });
    await expect(crList.getByRole("link", { name: `#${crs.conflicted} CR conflicted` }).count()).resolves.toBe(1);

    // The same link a second time: refused, in a page, before it asks anything.
    const reused = await (await browser.newContext()).newPage();
    const again = await reused.goto(printed.stdout.trim());
    expect(again!.status()).toBe(401);
    await expect(reused.getByRole("button", { name: "Continue", exact: true }).count()).resolves.toBe(0);
    expect(again!.headers()["content-type"]).toContain("text/html");
    await expect(reused.getByRole("alert").textContent()).resolves.toContain("expired or was already used");
    // A code past its two minutes: refused the same way.
    const late = (await rest("POST", "/v1/dashboard/sign-in-links", { next: "/dashboard" })).body.url;
    await api.services.sql.query("update dashboard_sign_in_codes set expires_at = now() - interval '1 second'");
    expect((await reused.goto(late))!.status()).toBe(401);
    expect(await reused.context().cookies()).toEqual([]);
    await reused.context().close();
  });

  it("a sign-in link's code is used only by its own page's Continue: not by opening it, not from another site", async () => {
    const url = new URL((await rest("POST", "/v1/dashboard/sign-in-links", { next: "/dashboard" })).body.url);
    const code = url.searchParams.get("code")!;
    // Opening the link (a preview bot, a prefetch) uses nothing up, twice over.
    for (let i = 0; i < 2; i++) expect((await fetch(url, { redirect: "manual" })).status).toBe(200);
    // A page of another site that posts the code (login CSRF: the browser would end up signed in as the
    // link's owner) is refused, and the code stays usable.
    const forged = await fetch(`${api.url}/dashboard/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://evil.example" },
      body: new URLSearchParams({ code, next: "/dashboard" }).toString(),
      redirect: "manual",
    });
    expect(forged.status).toBe(403);
    expect(forged.headers.get("set-cookie")).toBeNull();
    const fresh = await browser.newContext();
    const confirm = await fresh.newPage();
    await confirm.goto(url.toString());
    await confirm.getByRole("button", { name: "Continue", exact: true }).click();
    await confirm.waitForURL(`${api.url}/dashboard`);
    expect((await fresh.cookies()).map((c) => c.name)).toEqual(["svc_dashboard"]);
    await fresh.close();
  });

  it("lists the user's projects, and answers another account's project as not found", async () => {
    const listed = await page.goto(`${api.url}/dashboard`);
    expect(listed!.status()).toBe(200);
    await shot("projects");
    await page.getByRole("link", { name: "Dashboard <demo>" }).click();
    expect(page.url()).toBe(`${api.url}/dashboard/projects/${projectId}`);

    const stranger = await seedUser(api.services, "stranger");
    const theirs = await call(api.url, "POST", "/v1/projects", { token: stranger.token, body: { name: "Theirs" } });
    const hidden = await page.goto(`${api.url}/dashboard/projects/${theirs.body.id}`);
    expect(hidden!.status()).toBe(404);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("not found");
    await page.goto(`${api.url}/dashboard`);
    await expect(page.getByRole("link", { name: "Theirs" }).count()).resolves.toBe(0);
    const nowhere = await page.goto(`${api.url}/dashboard/no-such-page`);
    expect(nowhere!.status()).toBe(404);
    expect(nowhere!.headers()["content-type"]).toContain("text/html");
    expect(nowhere!.headers()["content-security-policy"]).toContain("default-src 'self'");
  });

  it("shows a CR's diff file by file and merges it with the Merge button; the API agrees", async () => {
    await page.goto(crPage(crs.feature));
    await shot("cr-open");
    const files = page.locator("details.file");
    await expect(files.count()).resolves.toBe(2);
    await expect(files.nth(0).locator("summary").textContent()).resolves.toMatch(/README\.md\s+modified\s+\+1\s+−0/);
    await expect(files.nth(1).textContent()).resolves.toContain("+a new feature");
    await expect(page.locator("#merge").locator("..").textContent()).resolves.toContain("clean");
    await expect(page.getByRole("button", { name: "Reopen", exact: true }).count()).resolves.toBe(0);

    await page.getByRole("textbox", { name: "Merge message (optional)" }).fill("Ship the feature");
    await page.getByRole("button", { name: "Merge", exact: true }).click();
    await page.waitForURL(crPage(crs.feature));
    await expect(page.locator("#cr-status").textContent()).resolves.toBe("merged");
    await shot("cr-merged");
    for (const name of ["Merge", "Close", "Reopen"])
      await expect(page.getByRole("button", { name, exact: true }).count()).resolves.toBe(0);
    const viaRest = await rest("GET", `/v1/projects/${projectId}/change-requests/${crs.feature}`);
    expect(viaRest.body.change_request).toMatchObject({ status: "merged", merged_by: user.userId });
    await work.git(["fetch", "-q", "origin"]);
    const log = await work.git(["log", "-1", "--format=%s", viaRest.body.change_request.merge_commit_sha]);
    expect(log.stdout.trim()).toBe("Ship the feature");
  });

  it("closes and reopens a CR with the Close and Reopen buttons", async () => {
    await page.goto(crPage(crs.closable));
    await page.getByRole("button", { name: "Close", exact: true }).click();
    await page.waitForURL(crPage(crs.closable));
    await expect(page.locator("#cr-status").textContent()).resolves.toBe("closed");
    await shot("cr-closed");
    await expect(page.getByRole("button", { name: "Merge", exact: true }).count()).resolves.toBe(0);
    await expect(page.getByRole("button", { name: "Close", exact: true }).count()).resolves.toBe(0);
    expect(
      (await rest("GET", `/v1/projects/${projectId}/change-requests/${crs.closable}`)).body.change_request.status,
    ).toBe("closed");
    await page.getByRole("button", { name: "Reopen", exact: true }).click();
    await page.waitForURL(crPage(crs.closable));
    await expect(page.locator("#cr-status").textContent()).resolves.toBe("open");
    expect(
      (await rest("GET", `/v1/projects/${projectId}/change-requests/${crs.closable}`)).body.change_request.status,
    ).toBe("open");
  });

  it("shows a conflicted CR's conflicting paths, and a refused merge's reason in words", async () => {
    await page.goto(crPage(crs.conflicted));
    await expect(page.locator("ul.conflicts").textContent()).resolves.toContain("conflict.txt");
    await page.getByRole("button", { name: "Merge", exact: true }).click();
    await page.waitForLoadState();
    await shot("cr-conflicted");
    await expect(page.getByRole("alert").textContent()).resolves.toBe("Merge failed: conflict.txt has conflicts.");
    await expect(page.locator("#cr-status").textContent()).resolves.toBe("open");
    expect(
      (await rest("GET", `/v1/projects/${projectId}/change-requests/${crs.conflicted}`)).body.change_request.status,
    ).toBe("open");
  });

  it("merges only the head the page showed: a push after it loaded is refused in words, nothing merges", async () => {
    const late = await openCr("late", { "late.txt": "reviewed\n" });
    await page.goto(crPage(late));
    await expect(page.locator("details.file").textContent()).resolves.toContain("+reviewed");
    // The agent pushes once more while the person reads the page.
    await work.commit("unreviewed", { "late.txt": "reviewed\nunseen\n" });
    await work.pushed("late");
    const mainBefore = (await rest("GET", `/v1/projects/${projectId}/change-requests/${late}`)).body.change_request
      .base_commit_sha;

    await page.getByRole("button", { name: "Merge", exact: true }).click();
    await page.waitForLoadState();
    await expect(page.getByRole("alert").textContent()).resolves.toMatch(/moved to [0-9a-f]{12} since you saw/);
    await expect(page.locator("#cr-status").textContent()).resolves.toBe("open");
    const after = (await rest("GET", `/v1/projects/${projectId}/change-requests/${late}`)).body.change_request;
    expect(after).toMatchObject({ status: "open", base_commit_sha: mainBefore });

    // The page now shows the new head, and its Merge lands exactly that.
    await expect(page.locator("details.file").textContent()).resolves.toContain("+unseen");
    await page.getByRole("button", { name: "Merge", exact: true }).click();
    await page.waitForURL(crPage(late));
    await expect(page.locator("#cr-status").textContent()).resolves.toBe("merged");
    const merged = (await rest("GET", `/v1/projects/${projectId}/change-requests/${late}`)).body.change_request;
    expect(merged.head_commit_sha).toBe(await work.sha("late"));
  });

  it("refuses a form post without this session's CSRF token", async () => {
    const [cookie] = await context.cookies();
    const post = (body: string) =>
      fetch(`${crPage(crs.closable)}/close`, {
        method: "POST",
        headers: { cookie: `svc_dashboard=${cookie!.value}`, "content-type": "application/x-www-form-urlencoded" },
        body,
        redirect: "manual",
      });
    for (const body of ["", "_csrf=forged"]) {
      const refused = await post(body);
      expect(refused.status).toBe(403);
      expect(refused.headers.get("content-type")).toContain("text/html");
      expect(await refused.text()).toContain("did not come from this dashboard");
    }
    expect(
      (await rest("GET", `/v1/projects/${projectId}/change-requests/${crs.closable}`)).body.change_request.status,
    ).toBe("open");
  });

  it("keeps a 5,000-line diff usable: files folded, page size and server time measured", async () => {
    const [cookie] = await context.cookies();
    const times: number[] = [];
    let bytes = 0;
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const res = await fetch(crPage(crs.big), { headers: { cookie: `svc_dashboard=${cookie!.value}` } });
      const body = await res.arrayBuffer();
      times.push(performance.now() - started);
      expect(res.status).toBe(200);
      bytes = body.byteLength;
    }
    times.sort((a, b) => a - b);
    // Of that, what git and the diff's parsing take (the same service call the REST diff route makes).
    const project = (await api.services.projects.byId(projectId))!;
    const diffStarted = performance.now();
    await api.services.changeRequests.diff(project, String(crs.big));
    const diffMs = performance.now() - diffStarted;
    console.log(
      `CR page with a ${BIG_DIFF_LINES}-line diff: ${bytes} bytes (${(bytes / 1024).toFixed(0)} KiB), server time median ${times[2]!.toFixed(0)} ms (min ${times[0]!.toFixed(0)}, max ${times[4]!.toFixed(0)}); of which the diff service ${diffMs.toFixed(0)} ms`,
    );
    await page.goto(crPage(crs.big));
    const file = page.locator("details.file");
    await expect(file.getAttribute("open")).resolves.toBeNull();
    await expect(file.locator("summary").textContent()).resolves.toContain(`+${BIG_DIFF_LINES}`);
    await file.locator("summary").click();
    await expect(file.locator("span.add").count()).resolves.toBe(BIG_DIFF_LINES);
    await expect(file.locator("span.add").last().textContent()).resolves.toBe(
      `+line ${BIG_DIFF_LINES - 1} <tag> & "quotes"`,
    );
    await shot("cr-big-diff");
  });

  it("fits a 375 px wide screen", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    for (const [name, url] of [
      ["narrow-project", `${api.url}/dashboard/projects/${projectId}`],
      ["narrow-cr", crPage(crs.conflicted)],
    ] as const) {
      await page.goto(url);
      await shot(name);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("authorizes a waiting `svc login` with the Authorize button of a signed-in browser", async () => {
    const opener = recordingBrowser(home.dir, "login-browser");
    const login = run(["login", "--api", api.url, "--host", "second"], { BROWSER: opener.path });
    const url = await opener.opened();
    expect(new URL(url).pathname).toBe("/dashboard/cli/login");

    await page.goto(url);
    await shot("cli-login");
    const me = (await rest("GET", "/v1/accounts/me")).body;
    const { email } = me.user;
    const named = await page.locator("main").textContent();
    expect(named).toContain(email);
    expect(named).toContain(me.account.name);
    expect(named).toContain("in 30 days");
    await page.getByRole("button", { name: "Authorize", exact: true }).click();
    await page.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/callback/);
    await expect(page.locator("body").textContent()).resolves.toContain("logged in");
    const done = await login;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toContain(`logged in to second as ${email}`);
    expect((await run(["whoami", "--host", "second"])).stdout).toContain(email);

    // Only the CLI's own loopback callback may receive a token.
    const forged = await page.goto(
      `${api.url}/dashboard/cli/login?callback=${encodeURIComponent("http://evil.example/callback")}&state=${"a".repeat(32)}`,
    );
    expect(forged!.status()).toBe(400);
    await expect(page.getByRole("button", { name: "Authorize", exact: true }).count()).resolves.toBe(0);
    // Nor the API's own port (nor a privileged one): the token would go to the API itself, not to a CLI.
    for (const port of [new URL(api.url).port, "443"]) {
      const callback = `http://127.0.0.1:${port}/callback`;
      const ownPort = await page.goto(
        `${api.url}/dashboard/cli/login?callback=${encodeURIComponent(callback)}&state=${"a".repeat(32)}`,
      );
      expect(ownPort!.status(), port).toBe(400);
      await expect(page.getByRole("alert").textContent()).resolves.toContain("not the API's");
      // Authorize's post is checked the same way: a 400, not a redirect carrying a token.
      const posted = await page.evaluate(
        async ([callback, csrf]) => {
          const res = await fetch("/dashboard/cli/login", {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ _csrf: csrf!, callback: callback!, state: "a".repeat(32) }).toString(),
            redirect: "manual",
          });
          return [res.type, res.status];
        },
        [callback, await page.locator("input[name=_csrf]").first().getAttribute("value")],
      );
      expect(posted).toEqual(["basic", 400]);
    }
  });

  it("signs out: the cookie is gone and ended, pages send the browser to the sign-in page", async () => {
    const [cookie] = await context.cookies();
    await page.goto(`${api.url}/dashboard`);
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await page.waitForURL(/\/dashboard\/sign-in/);
    await shot("signed-out");
    await expect(page.getByRole("status").textContent()).resolves.toBe("You are signed out.");
    await expect(page.locator("main").textContent()).resolves.toContain("svc projects open");
    expect(await context.cookies()).toEqual([]);
    const reused = await fetch(`${api.url}/dashboard/projects/${projectId}`, {
      headers: { cookie: `svc_dashboard=${cookie!.value}` },
      redirect: "manual",
    });
    expect(reused.status).toBe(303);
    expect(reused.headers.get("location")).toBe(
      `/dashboard/sign-in?next=${encodeURIComponent(`/dashboard/projects/${projectId}`)}`,
    );
    await page.goto(`${api.url}/dashboard`);
    expect(page.url()).toBe(`${api.url}/dashboard/sign-in?next=%2Fdashboard`);
  });
});
