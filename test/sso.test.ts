import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";
import type { Browser, BrowserContext, Page, Response } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootstrapAdmin } from "../api/accounts/bootstrap.ts";
import { installationAccount } from "../api/accounts/installation-account.ts";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { TOKEN_PREFIX } from "../protocol/token.ts";
import { call, startApi, type TestApi } from "./support/api-server.ts";
import { requireChromium } from "./support/browser.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";

const CLIENT_ID = "svc-dashboard";
const CLIENT_SECRET = newSecret("test_client_secret_");
const ALLOWED_DOMAIN = "example.test";

/** The provider's people, by login (their `sub`): what it says of each, changed by a test when it needs to. */
const people = new Map<string, { email: string; email_verified: boolean; name: string }>([
  ["ann", { email: "Ann@Example.test", email_verified: true, name: "Ann Example" }],
  ["olly", { email: "olly@elsewhere.test", email_verified: true, name: "Olly Elsewhere" }],
  ["uma", { email: "uma@example.test", email_verified: false, name: "Uma Unverified" }],
  ["sam", { email: "sam@example.test", email_verified: true, name: "Sam State" }],
  ["ivy", { email: "ivy@elsewhere.test", email_verified: true, name: "Ivy Invited" }],
]);

/**
 * A real OpenID provider (oidc-provider) in this process: its built-in login form (any password), PKCE required, and
 * consent taken as given to svc, as a company's provider does for its own apps. Its issuer is `localhost` while the
 * API is `127.0.0.1`: two sites, so its redirect back is the cross-site navigation a real provider's is.
 */
function oidcProvider(issuer: string, redirectUri: string): Provider {
  const signingKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });
  return new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
      },
    ],
    async findAccount(_ctx, sub) {
      const person = people.get(sub);
      return person && { accountId: sub, claims: async () => ({ sub, ...person }) };
    },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    async loadExistingGrant(ctx) {
      const grantId = ctx.oidc.result?.consent?.grantId ?? ctx.oidc.session!.grantIdFor(ctx.oidc.client!.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client!.clientId,
        accountId: ctx.oidc.session!.accountId!,
      });
      grant.addOIDCScope("openid email profile");
      await grant.save();
      return grant;
    },
    jwks: { keys: [{ ...signingKey, kid: "test", use: "sig", alg: "RS256" }] },
    cookies: { keys: [newSecret("cookie_")] },
    ttl: { Interaction: 600, Session: 600, Grant: 600, AccessToken: 600, IdToken: 600 },
  });
}

describe("single sign-on: 'Sign in with SSO' against a real OpenID provider on loopback (Chromium)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let unconfigured: TestApi;
  let providerServer: Server;
  let browser: Browser;
  let accountId: string;
  let projectId: string;
  let adminToken: string;
  const contexts: BrowserContext[] = [];
  /** Set by heldCallback: the provider's next redirect back to svc goes here instead of to the browser. */
  let holdCallback: ((url: string) => void) | undefined;

  const count = async (table: string) =>
    Number((await db.sql.query<{ n: string }>(`select count(*) as n from ${table}`))[0]!.n);
  /** What a sign-in creates: nothing of it may exist after a refused one. */
  const created = async () => ({
    users: await count("users"),
    memberships: await count("memberships"),
    identities: await count("user_identities"),
    sessions: await count("dashboard_sessions"),
  });
  const isCallback = (url: string) => new URL(url).pathname === "/auth/oidc/callback";

  /**
   * A fresh browser from `path` of the dashboard (signed out, so its sign-in page) through "Sign in with SSO" to the
   * provider's login form, filled in as `login`: submitting it is the test's. With `next`, straight to the start of
   * a sign-in going there instead, as a link to it elsewhere would.
   */
  async function signIn(login: string, options: { path?: string; next?: string } = {}) {
    const context = await browser.newContext();
    contexts.push(context);
    const page = await context.newPage();
    if (options.next) await page.goto(`${api.url}/auth/oidc/start?next=${encodeURIComponent(options.next)}`);
    else {
      await page.goto(`${api.url}${options.path ?? "/dashboard"}`);
      await page.getByRole("link", { name: "Sign in with SSO" }).click();
    }
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill("any password");
    return { context, page };
  }

  async function submitLogin(page: Page): Promise<Response> {
    const callback = page.waitForResponse((r) => isCallback(r.url()));
    await page.getByRole("button", { name: "Sign-in" }).click();
    return callback;
  }

  /**
   * Submits the provider's login form, but the provider's redirect back is held (the browser stays at the provider):
   * the callback URL it carried, for the test to send itself. Held at the provider, since a browser's request
   * interception never sees the hops of a redirect.
   */
  async function heldCallback(page: Page): Promise<string> {
    const url = new Promise<string>((resolve) => {
      holdCallback = resolve;
    });
    await page.getByRole("button", { name: "Sign-in" }).click();
    return url;
  }

  beforeAll(async () => {
    browser = await requireChromium();
    db = await freshDatabase("pglite");
    // The provider's port first: the API needs its issuer, the provider the API's redirect URI.
    providerServer = createServer();
    await new Promise<void>((resolve) => providerServer.listen(0, "127.0.0.1", resolve));
    const issuer = `http://localhost:${(providerServer.address() as AddressInfo).port}`;
    api = await startApi(db.sql, {
      oidc: { issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowedDomains: [ALLOWED_DOMAIN] },
    });
    const provider = oidcProvider(issuer, `${api.url}/auth/oidc/callback`).callback();
    providerServer.on("request", (req, res) => {
      const hold = holdCallback;
      if (hold) {
        const setHeader = res.setHeader.bind(res);
        res.setHeader = ((name: string, value: string | number | readonly string[]) => {
          if (name.toLowerCase() !== "location" || typeof value !== "string" || !isCallback(value))
            return setHeader(name, value);
          holdCallback = undefined;
          hold(value);
          return setHeader(name, "/held");
        }) as typeof res.setHeader;
      }
      void provider(req, res);
    });
    unconfigured = await startApi(db.sql);

    // The installation as `svc self-host start` leaves it: the admin, their account, a project in it.
    adminToken = newSecret(TOKEN_PREFIX);
    await bootstrapAdmin(api.services, hashSecret(adminToken));
    accountId = (await installationAccount(db.sql))!;
    const project = await call(api.url, "POST", "/v1/projects", { token: adminToken, body: { name: "Team project" } });
    expect(project.status, JSON.stringify(project.body)).toBe(201);
    projectId = project.body.id;
  }, 120_000);

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => {});
    await browser?.close();
    await unconfigured?.close();
    await api?.close();
    providerServer?.close();
    await db?.drop();
  });

  it("a new person of an allowed domain lands signed in where they were going, a member of the installation's account", async () => {
    const before = await created();
    const { page } = await signIn("ann", { path: `/dashboard/projects/${projectId}` });
    const callback = await submitLogin(page);
    expect(callback.status()).toBe(200);
    // The session cookie is set on the callback and the dashboard reached by a same-site step after it.
    await page.waitForURL(`${api.url}/dashboard/projects/${projectId}`);
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toContain("Team project");

    const [user] = await db.sql.query<{ id: string; email: string; name: string }>(
      "select id, email, name from users where email = 'ann@example.test'",
    );
    expect(user).toMatchObject({ name: "Ann Example" });
    const memberships = await db.sql.query<{ account_id: string; role: string }>(
      "select account_id, role from memberships where user_id = $1",
      [user!.id],
    );
    expect(memberships).toEqual([{ account_id: accountId, role: "member" }]);
    const [identity] = await db.sql.query<{ issuer: string; subject: string }>(
      "select issuer, subject from user_identities where user_id = $1",
      [user!.id],
    );
    expect(identity).toEqual({ issuer: expect.stringMatching(/^http:\/\/localhost:\d+$/), subject: "ann" });
    expect(await created()).toEqual({
      users: before.users + 1,
      memberships: before.memberships + 1,
      identities: before.identities + 1,
      sessions: before.sessions + 1,
    });
  });

  it("a second sign-in is the same user, found by the provider's subject even after their email changed there", async () => {
    const [ann] = await db.sql.query<{ id: string }>("select id from users where email = 'ann@example.test'");
    people.set("ann", { ...people.get("ann")!, email: "ann.renamed@example.test" });
    try {
      const before = await created();
      const { page, context } = await signIn("ann");
      expect((await submitLogin(page)).status()).toBe(200);
      await page.waitForURL(`${api.url}/dashboard`);
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Projects");
      await expect(page.getByRole("link", { name: /Team project/ }).count()).resolves.toBe(1);
      expect(await created()).toEqual({ ...before, sessions: before.sessions + 1 });
      // The browser's dashboard session is Ann's.
      const cookie = (await context.cookies(`${api.url}/dashboard`)).find((c) => c.name === "svc_dashboard");
      const [session] = await db.sql.query<{ user_id: string }>(
        "select user_id from dashboard_sessions where token_hash = $1",
        [hashSecret(cookie!.value)],
      );
      expect(session!.user_id).toBe(ann!.id);
    } finally {
      people.set("ann", { ...people.get("ann")!, email: "Ann@Example.test" });
    }
  });

  it("an email outside the allowed domains gets a page saying so, and nothing is created", async () => {
    const before = await created();
    const { page } = await signIn("olly");
    const callback = await submitLogin(page);
    expect(callback.status()).toBe(403);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("olly@elsewhere.test has no user here");
    await expect(page.getByRole("alert").textContent()).resolves.toContain("do not join by themselves");
    expect(await created()).toEqual(before);
  });

  it("an invited person of another domain gets a user by SSO, and their invite's page joins them", async () => {
    const invite = await call(api.url, "POST", "/v1/accounts/members/invites", {
      token: adminToken,
      body: { email: "ivy@elsewhere.test", role: "viewer" },
    });
    expect(invite.status, JSON.stringify(invite.body)).toBe(201);
    const invitePath = new URL(invite.body.url).pathname;
    const { page } = await signIn("ivy", { next: invitePath });
    expect((await submitLogin(page)).status()).toBe(200);
    await page.waitForURL(`${api.url}${invitePath}`);
    const [ivy] = await db.sql.query<{ id: string }>("select id from users where email = 'ivy@elsewhere.test'");
    // A user, but no member of anything until the invite is taken up.
    expect(await db.sql.query("select 1 from memberships where user_id = $1", [ivy!.id])).toEqual([]);
    await page.getByRole("button", { name: "Join admin" }).click();
    await page.waitForURL(`${api.url}/dashboard`);
    expect(await db.sql.query("select account_id, role from memberships where user_id = $1", [ivy!.id])).toEqual([
      { account_id: accountId, role: "viewer" },
    ]);
  });

  it("an email the provider has not verified is refused, even in an allowed domain", async () => {
    const before = await created();
    const { page } = await signIn("uma");
    const callback = await submitLogin(page);
    expect(callback.status()).toBe(403);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("has not verified uma@example.test");
    expect(await created()).toEqual(before);
  });

  it("a callback with another state is refused, nothing is created, and the sign-in it belonged to is spent", async () => {
    const before = await created();
    const { page } = await signIn("sam");
    const held = new URL(await heldCallback(page));
    const forged = new URL(held);
    forged.searchParams.set("state", "forged-state");
    const refused = await page.goto(forged.href);
    expect(refused!.status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain('unexpected "state"');
    // The genuine answer after it finds no sign-in under way: a state is tried once.
    const after = await page.goto(held.href);
    expect(after!.status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("expired or was used already");
    expect(await created()).toEqual(before);
  });

  it("a replayed callback is refused, even with the sign-in's cookie put back", async () => {
    const { page, context } = await signIn("ann");
    // The browser's half of the sign-in, as someone who copied it would have it.
    const [handle] = (await context.cookies(`${api.url}/auth/oidc/callback`)).filter((c) => c.name === "svc_sso");
    expect(handle).toBeDefined();
    let callbackUrl = "";
    page.on("request", (r) => {
      if (isCallback(r.url())) callbackUrl = r.url();
    });
    expect((await submitLogin(page)).status()).toBe(200);
    await page.waitForURL(`${api.url}/dashboard`);
    const sessions = await count("dashboard_sessions");

    const again = await page.goto(callbackUrl);
    expect(again!.status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("expired or was used already");

    await context.addCookies([handle!]);
    const withCookie = await page.goto(callbackUrl);
    expect(withCookie!.status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("expired or was used already");
    expect(await count("dashboard_sessions")).toBe(sessions);
  });

  it("without SVC_OIDC_* the sign-in page offers no SSO, and its routes say it is not configured", async () => {
    const page = await fetch(`${unconfigured.url}/dashboard/sign-in`);
    expect(page.status).toBe(200);
    expect(await page.text()).not.toContain("Sign in with SSO");
    const withSso = await (await fetch(`${api.url}/dashboard/sign-in?next=/dashboard/projects`)).text();
    expect(withSso).toContain('href="/auth/oidc/start?next=%2Fdashboard%2Fprojects"');
    for (const path of ["/auth/oidc/start", "/auth/oidc/callback?code=x&state=y"]) {
      const res = await fetch(`${unconfigured.url}${path}`, { redirect: "manual" });
      expect(res.status, path).toBe(503);
      expect(await res.text(), path).toContain("Single sign-on is not configured");
    }
  });
});
