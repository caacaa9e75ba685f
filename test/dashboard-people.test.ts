import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword } from "../api/people/passwords.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { requireChromium } from "./support/browser.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";

const ARTIFACTS = new URL("../test-artifacts/dashboard-people/", import.meta.url).pathname;
const OWNER_PASSWORD = "the owner's password";
const IVY = "ivy@example.test";
const IVY_PASSWORD = "ivy's own password";

/**
 * Issue 32 in a real browser: an admin invites from the members page, the invitee's page sets a password and lands
 * signed in on the dashboard, signs out and back in with the password; a wrong one gets the one generic error.
 */
describe("the dashboard's people pages: members, invite, password sign-in (Chromium)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let browser: Browser;
  let admin: Page;
  let ivy: Page;
  let ownerEmail: string;
  let accountName: string;
  let inviteUrl: string;
  const shot = (page: Page, name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  async function signIn(page: Page, email: string, password: string) {
    await page.goto(`${api.url}/dashboard/sign-in`);
    await page.getByLabel("Email", { exact: true }).fill(email);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
  }

  beforeAll(async () => {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await requireChromium();
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    const owner = await seedUser(api.services, "owner");
    await db.sql.query("update users set password_hash = $2 where id = $1", [
      owner.userId,
      await hashPassword(OWNER_PASSWORD),
    ]);
    const me = (await call(api.url, "GET", "/v1/accounts/me", { token: owner.token })).body;
    ownerEmail = me.user.email;
    accountName = me.account.name;
    admin = await (await browser.newContext()).newPage();
    ivy = await (await browser.newContext()).newPage();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await api?.close();
    await db?.drop();
  });

  it("an owner signs in with a password and invites from the members page: the link is shown once", async () => {
    await signIn(admin, ownerEmail, OWNER_PASSWORD);
    await admin.waitForURL(`${api.url}/dashboard`);
    await admin.getByRole("link", { name: "Members", exact: true }).click();
    await admin.waitForURL(`${api.url}/dashboard/members`);
    await admin.getByLabel("Email", { exact: true }).fill(IVY);
    await admin.getByLabel("Role", { exact: true }).selectOption("member");
    await admin.getByRole("button", { name: "Invite", exact: true }).click();
    await expect(admin.getByRole("status").textContent()).resolves.toContain(`Invited ${IVY} as member`);
    inviteUrl = (await admin.locator("#invite-url").textContent())!;
    expect(inviteUrl).toMatch(new RegExp(`^${api.url}/dashboard/invites/svc_inv_`));
    await shot(admin, "members-invited");
    await admin.goto(`${api.url}/dashboard/members`);
    await expect(admin.locator("#invite-url").count()).resolves.toBe(0);
  });

  it("the invite's page sets a name and password and lands signed in on the dashboard", async () => {
    await ivy.goto(inviteUrl);
    const text = await ivy.locator("main").textContent();
    expect(text).toContain(accountName);
    expect(text).toContain(IVY);
    await shot(ivy, "invite");
    await ivy.getByLabel("Display name").fill("Ivy Vine");
    await ivy.getByLabel("Password", { exact: true }).fill(IVY_PASSWORD);
    await ivy.getByLabel("Password again").fill(IVY_PASSWORD);
    await ivy.getByRole("button", { name: "Set password and join" }).click();
    await ivy.waitForURL(`${api.url}/dashboard`);
    await expect(ivy.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Projects");
    await ivy.getByRole("link", { name: "Members", exact: true }).click();
    await expect(ivy.locator("main").textContent()).resolves.toContain("Ivy Vine");
    // A member sees the list, not the controls.
    await expect(ivy.getByRole("button", { name: "Invite" }).count()).resolves.toBe(0);
    await shot(ivy, "members-as-member");
  });

  it("signs out, then back in with the password; a wrong password gets the generic error", async () => {
    await ivy.getByRole("button", { name: "Sign out", exact: true }).click();
    await ivy.waitForURL(/\/dashboard\/sign-in\?signed_out=1$/);
    await expect(ivy.getByRole("status").textContent()).resolves.toBe("You are signed out.");
    expect(await ivy.context().cookies()).toEqual([]);

    await signIn(ivy, IVY, "not the password");
    await expect(ivy.getByRole("alert").textContent()).resolves.toBe("Wrong email or password.");
    expect(new URL(ivy.url()).pathname).toBe("/dashboard/sign-in/password");
    expect(await ivy.context().cookies()).toEqual([]);
    await shot(ivy, "sign-in-refused");

    await signIn(ivy, IVY, IVY_PASSWORD);
    await ivy.waitForURL(`${api.url}/dashboard`);
    await expect(ivy.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Projects");
  });

  it("the owner changes the new member's role and removes them", async () => {
    await admin.goto(`${api.url}/dashboard/members`);
    await admin.getByLabel(`Role of ${IVY}`, { exact: true }).selectOption("admin");
    await admin.getByRole("button", { name: `Change role of ${IVY}` }).click();
    await admin.waitForURL(`${api.url}/dashboard/members`);
    await expect(admin.locator("tr", { hasText: IVY }).textContent()).resolves.toContain("admin");
    // The last owner cannot step down: the page says why.
    await admin.getByLabel(`Role of ${ownerEmail}`, { exact: true }).selectOption("member");
    await admin.getByRole("button", { name: `Change role of ${ownerEmail}` }).click();
    await expect(admin.getByRole("alert").textContent()).resolves.toContain("last owner");
    await shot(admin, "members-last-owner");
    await admin.getByRole("button", { name: `Remove ${IVY}` }).click();
    await admin.waitForURL(`${api.url}/dashboard/members`);
    await expect(admin.locator("main").textContent()).resolves.not.toContain(IVY);
  });
});
