import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { requireChromium } from "./support/browser.ts";
import { CHECKS_MANIFEST, seededChecks } from "./support/check-runs.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { waitFor } from "./support/wait.ts";

const ARTIFACTS = new URL("../test-artifacts/dashboard-cr-checks/", import.meta.url).pathname;
/** What lint printed: markup in it is text on the page. */
const LINT_LOG = "src/app.ts:3 <script>alert(1)</script> is not allowed\nlint: 1 problem\n";

/**
 * DESIGN "The review loop on a CR" on the dashboard's CR page, in Chromium: the Checks section with each check's log,
 * followed live while checks run; Merge disabled while they have not passed; the merge queue's toggle. The API runs
 * no check scheduler: the runs are written through the scheduler's own store when the test says.
 */
describe("the CR page's checks, its Merge gate and its auto-merge toggle (Chromium, seeded check runs)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  let work: WorkRepo;
  let checks: ReturnType<typeof seededChecks>;

  const crPage = (n: number) => `${api.url}/dashboard/projects/${projectId}/crs/${n}`;
  const item = (name: string, status?: string) =>
    page.locator(`#checks-section li[data-name="${name}"]${status ? `[data-status="${status}"]` : ""}`);
  const isOpen = (name: string) =>
    item(name)
      .locator("details")
      .evaluate((d) => (d as HTMLDetailsElement).open);
  const mergeButton = () => page.getByRole("button", { name: "Merge", exact: true });

  async function openCr(branch: string): Promise<number> {
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(branch, { create: true, from: "origin/main" });
    await work.commit(`work on ${branch}`, { [`${branch}.txt`]: `${branch}\n` });
    await work.pushed(branch);
    const opened = await call(api.url, "POST", `/v1/projects/${projectId}/change-requests`, {
      token: user.token,
      body: { title: `CR ${branch}`, head_ref: branch },
    });
    expect(opened.status, JSON.stringify(opened.body)).toBe(201);
    return opened.body.number;
  }

  beforeAll(async () => {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await requireChromium();
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Checked" } });
    projectId = created.body.id;
    checks = seededChecks(api.services.sql, api.url, user.token, projectId);
    work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
    await work.commit("checks", { "svc.toml": CHECKS_MANIFEST });
    await landOnDefault(api.url, user.token, projectId, work, "add checks");

    const link = await call(api.url, "POST", "/v1/dashboard/sign-in-links", {
      token: user.token,
      body: { next: `/dashboard/projects/${projectId}` },
    });
    expect(link.status).toBe(201);
    context = await browser.newContext();
    page = await context.newPage();
    await page.goto(link.body.url);
    await page.getByRole("button", { name: "Continue", exact: true }).click();
    await page.waitForURL(`**/dashboard/projects/${projectId}`);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await api?.close();
    await db?.drop();
  });

  it("shows a failed check's log open and a passed one folded; Merge is disabled: checks have not passed", async () => {
    const n = await openCr("red");
    await checks.queue(n, "unit", "lint");
    const { unit, lint } = await checks.start();
    await checks.finish(unit!, "passed", 0, "all 12 tests passed\n", 4);
    await checks.finish(lint!, "failed", 1, LINT_LOG, 65);

    await page.goto(crPage(n));
    await page.screenshot({ path: join(ARTIFACTS, "failed.png"), fullPage: true });
    await expect(page.locator("#checks").textContent()).resolves.toBe("Checks failed");
    await expect(item("lint").locator("summary").textContent()).resolves.toMatch(/lint\s*failed · exit 1 · 1m05s/);
    expect(await isOpen("lint")).toBe(true);
    await expect(item("lint").locator("pre").textContent()).resolves.toBe(LINT_LOG);
    await expect(item("unit").locator("summary").textContent()).resolves.toMatch(/unit\s*passed · exit 0 · 4s/);
    expect(await isOpen("unit")).toBe(false);

    expect(await mergeButton().isDisabled()).toBe(true);
    await expect(page.locator("#merge-blocked").textContent()).resolves.toContain("Checks have not passed");
    // Nothing runs: the page follows nothing.
    await expect(page.locator('script[src$="cr-checks.js"]').count()).resolves.toBe(0);
  });

  it("follows running checks live: the log as it grows, the results, and Merge enabled once they pass", async () => {
    const n = await openCr("live");
    await checks.queue(n, "unit");
    const { unit } = await checks.start();
    await checks.setLog(unit!, "step 1\n");
    await checks.queue(n, "lint");

    await page.goto(crPage(n));
    await expect(item("unit").getAttribute("data-status")).resolves.toBe("running");
    await expect(item("lint").getAttribute("data-status")).resolves.toBe("queued");
    expect(await mergeButton().isDisabled()).toBe(true);
    await expect(page.locator("#merge-blocked").textContent()).resolves.toContain("Checks have not passed yet");
    // A reload would lose this mark: the page must change in place.
    await page.evaluate(() => {
      (window as unknown as { unreloaded: boolean }).unreloaded = true;
    });

    await checks.setLog(unit!, "step 1\nstep 2\n");
    await page.locator("#checks-section pre", { hasText: "step 2" }).waitFor();
    const { lint } = await checks.start();
    await item("lint", "running").waitFor();
    await checks.finish(unit!, "passed", 0, "step 1\nstep 2\ndone\n");
    await checks.finish(lint!, "passed", 0, "clean\n");
    await item("lint", "passed").waitFor();
    await waitFor("Merge enabled", () => mergeButton().isEnabled());
    expect(await page.locator("#merge-blocked").isHidden()).toBe(true);
    expect(await isOpen("unit")).toBe(false);
    expect(await page.evaluate(() => (window as unknown as { unreloaded?: boolean }).unreloaded)).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, "passed-live.png"), fullPage: true });
  });

  it("Merge when checks pass queues the CR and Cancel auto-merge takes it out; the queue letting it go shows why", async () => {
    const n = await openCr("queued");
    await page.goto(crPage(n));
    await page.getByRole("button", { name: "Merge when checks pass", exact: true }).click();
    await page.waitForURL(`${crPage(n)}#merge`);
    expect((await checks.crOf(n)).auto_merge).toBe(true);
    await expect(page.locator("#merge").locator("..").textContent()).resolves.toContain(
      "Merges by itself once its checks pass.",
    );
    await page.screenshot({ path: join(ARTIFACTS, "queued.png"), fullPage: true });

    await page.getByRole("button", { name: "Cancel auto-merge", exact: true }).click();
    await page.waitForURL(`${crPage(n)}#merge`);
    expect((await checks.crOf(n)).auto_merge).toBe(false);
    await page.getByRole("button", { name: "Merge when checks pass", exact: true }).waitFor();

    // Queued again, with the page open: the queue lets it go (its checks failed), and the page shows it by itself.
    await page.getByRole("button", { name: "Merge when checks pass", exact: true }).click();
    await page.waitForURL(`${crPage(n)}#merge`);
    await checks.queue(n, "unit", "lint");
    const { unit, lint } = await checks.start();
    await checks.finish(unit!, "passed", 0, "ok\n");
    await checks.finish(lint!, "failed", 1, LINT_LOG);
    const note = "check 'lint' failed on abc123abc123";
    await api.services.sql.query(
      "update change_requests set auto_merge_by = null, auto_merge_at = null, auto_merge_note = $2 where project_id = $1 and number = $3",
      [projectId, note, n],
    );
    await page.locator("#auto-merge-note").waitFor();
    await expect(page.locator("#auto-merge-note").textContent()).resolves.toBe(`Auto-merge stopped: ${note}`);
    await expect(page.getByRole("button", { name: "Merge when checks pass", exact: true }).count()).resolves.toBe(1);
    expect(await isOpen("lint")).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, "let-go.png"), fullPage: true });
  });

  it("a Merge posted while the checks have not passed is refused on the page in words", async () => {
    const n = await openCr("forced");
    await page.goto(crPage(n));
    expect(await mergeButton().isDisabled()).toBe(true);
    // The form as a browser without the disabled button would post it.
    await mergeButton().evaluate((b) => {
      (b as HTMLButtonElement).disabled = false;
    });
    await mergeButton().click();
    await page.waitForLoadState();
    await expect(page.getByRole("alert").textContent()).resolves.toMatch(/cannot merge until its checks pass/);
    expect((await checks.crOf(n)).status).toBe("open");
  });
});
