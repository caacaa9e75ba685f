import { readFileSync } from "node:fs";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import { call } from "../support/api-server.ts";
import { requireChromium } from "../support/browser.ts";
import { authedUrl, workRepo } from "../support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";

const HOSTILE_APP = new URL("../fixtures/hostile-preview-app.mjs", import.meta.url).pathname;

/**
 * A person signed in to the dashboard opens the preview link of a session whose agent serves a hostile page
 * (real sandbox, real Chromium). The dashboard is opened at `localhost`, so the preview host
 * (`3000-<session>.localhost`) is even same-site with it: the hardest case for cookies.
 */
describe("a hostile page in a preview against the signed-in dashboard", () => {
  let sp: SandboxedProject;
  let browser: Browser;
  let crNumber: number;
  let sessionId: string;
  let dashboard: string;

  const cr = async () =>
    (
      await call(sp.api.url, "GET", `/v1/projects/${sp.project.id}/change-requests/${crNumber}`, {
        token: sp.user.token,
      })
    ).body.change_request;
  const mainTip = async () =>
    (
      await git(["rev-parse", "refs/heads/main"], { dir: sp.api.services.repos.managedDir(sp.project.id) })
    ).stdout.trim();
  const tokenCount = async () =>
    Number(
      (
        await sp.db.sql.query<{ n: string }>("select count(*) as n from tokens where user_id = $1", [sp.user.userId])
      )[0]!.n,
    );

  beforeAll(async () => {
    browser = await requireChromium();
    sp = await startSandboxedProject("Hostile");
    dashboard = `http://localhost:${new URL(sp.api.url).port}`;
    const work = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await work.git(["fetch", "-q", "origin", "main"]);
    await work.checkout("agent-work", { create: true, from: "FETCH_HEAD" });
    await work.commit("the agent's change", { "agent.txt": "unreviewed\n" });
    await work.pushed("agent-work");
    const opened = await call(sp.api.url, "POST", `/v1/projects/${sp.project.id}/change-requests`, {
      token: sp.user.token,
      body: { title: "Agent work", head_ref: "agent-work" },
    });
    crNumber = opened.body.number;

    sessionId = (await sp.sessions("", "POST", {})).body.session_id;
    for (let i = 0; i < 480 && (await sp.sessions(`/${sessionId}`)).body.status === "provisioning"; i++)
      await new Promise((r) => setTimeout(r, 250));
    expect((await sp.sessions(`/${sessionId}`)).body.status).toBe("running");
    const [container] = await sp.docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    const app = await sp.docker.getContainer(container!.Id).exec({
      Cmd: ["/opt/svc/bin/node", "--input-type=module", "-e", readFileSync(HOSTILE_APP, "utf8")],
      Env: [`TARGET=${dashboard}`, `CR=/dashboard/projects/${sp.project.id}/crs/${crNumber}`],
    });
    await app.start({ Detach: true });
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await sp?.close();
  });

  it("gets nothing: it cannot read the dashboard, merge through it, or take a login token", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    // The person signs in, on `localhost`.
    const link = await call(sp.api.url, "POST", "/v1/dashboard/sign-in-links", {
      token: sp.user.token,
      body: { next: `/dashboard/projects/${sp.project.id}` },
    });
    const signIn = new URL(link.body.url);
    await page.goto(`${dashboard}${signIn.pathname}${signIn.search}`);
    await page.getByRole("button", { name: "Continue", exact: true }).click();
    await page.waitForURL(`${dashboard}/dashboard/projects/${sp.project.id}`);
    const [cookie] = await context.cookies(`${dashboard}/dashboard/`);
    expect(cookie).toMatchObject({ name: "svc_dashboard", domain: "localhost", sameSite: "Strict", httpOnly: true });

    const before = { status: (await cr()).status, main: await mainTip(), tokens: await tokenCount() };
    expect(before.status).toBe("open");

    // The person opens the agent's preview link.
    const preview = new URL((await sp.sessions(`/${sessionId}/previews`, "POST", { port: 3000 })).body.url as string);
    expect(preview.hostname).toBe(`3000-${sessionId}.localhost`);
    let ready = false;
    for (let i = 0; i < 50 && !ready; i++) {
      const res = await page.goto(preview.href);
      ready = res?.status() === 200;
      if (!ready) await new Promise((r) => setTimeout(r, 200));
    }
    await page.waitForFunction(() => document.getElementById("out")?.textContent?.includes("done"), null, {
      timeout: 15_000,
    });
    const attempts = (await page.textContent("#out"))!;
    // Another origin reads nothing of the dashboard, so it never learns a CSRF token; the login page likewise.
    expect(attempts).toContain("read:blocked");
    expect(attempts).toContain("login:blocked");

    // A form the page submits is refused: the browser says where it came from.
    const submitted = page.waitForResponse((res) => res.url().endsWith(`/crs/${crNumber}/merge`));
    await page.goto(`${preview.origin}/?submit=1`);
    const refused = await submitted;
    expect(refused.request().method()).toBe("POST");
    expect(refused.status()).toBe(403);
    await page.waitForURL(`${dashboard}/dashboard/projects/${sp.project.id}/crs/${crNumber}/merge`);
    expect(await page.textContent("body")).toContain("came from another site");

    expect(await cr()).toMatchObject({ status: before.status });
    expect(await mainTip()).toBe(before.main);
    expect(await tokenCount()).toBe(before.tokens);
    // Nothing ever reached the page's own "callback" either.
    await page.goto(`${preview.origin}/stolen`);
    expect(await page.textContent("body")).toBe("0");

    // The person's own dashboard still works with the same cookie: the merge button lands the CR.
    await page.goto(`${dashboard}/dashboard/projects/${sp.project.id}/crs/${crNumber}`);
    await page.getByRole("button", { name: "Merge", exact: true }).click();
    await page.waitForURL(`${dashboard}/dashboard/projects/${sp.project.id}/crs/${crNumber}`);
    expect((await cr()).status).toBe("merged");
    await context.close();
  });
});
