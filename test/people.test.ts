import { Agent, fetch as fetchFrom } from "undici";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { csrfToken } from "../api/dashboard/browser-sessions.ts";
import { hashPassword } from "../api/people/passwords.ts";
import { call, type Reply, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";

/** An answer of the dashboard: its page, where it sends the browser, and the session cookie it sets. */
type Page = { status: number; text: string; location: string | null; cookie: string | undefined };

/**
 * Issue 32, people: invites (one-time, 7 days, bound to an email), passwords (dashboard form and
 * `POST /v1/auth/password`, rate-limited per email and per client address), members and roles, an account that keeps
 * an owner. Real HTTP; the dashboard's forms posted as a browser posts them.
 */
describe.each(databaseKinds("pglite"))("people: invites, passwords, members (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let owner: Awaited<ReturnType<typeof seedUser>>;
  let accountName: string;
  let ownerEmail: string;
  /** Every answer's body, to show that no password hash ever leaves the API. */
  const seen: string[] = [];
  const agents = new Map<string, Agent>();

  /** A request from one client address of 127/8: what the per-address limit counts. */
  async function send(
    path: string,
    init: { method?: string; body?: string; headers?: Record<string, string> },
    from?: string,
  ) {
    if (from && !agents.has(from)) agents.set(from, new Agent({ localAddress: from }));
    const dispatcher = from ? agents.get(from) : undefined;
    const res = await fetchFrom(api.url + path, { ...init, redirect: "manual", dispatcher });
    const text = await res.text();
    seen.push(text);
    const cookie = /svc_dashboard=([^;]*)/.exec(res.headers.get("set-cookie") ?? "")?.[1];
    return { status: res.status, text, location: res.headers.get("location"), cookie };
  }
  const page = (path: string, cookie?: string): Promise<Page> =>
    send(path, { headers: cookie ? { cookie: `svc_dashboard=${cookie}` } : {} });
  /** A form post of the dashboard, as a browser sends it (urlencoded, same origin). */
  const form = (path: string, fields: Record<string, string>, options: { cookie?: string; from?: string } = {}) =>
    send(
      path,
      {
        method: "POST",
        body: new URLSearchParams(fields).toString(),
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          origin: api.url,
          ...(options.cookie ? { cookie: `svc_dashboard=${options.cookie}` } : {}),
        },
      },
      options.from,
    );
  const rest = async (method: string, path: string, token?: string, body?: unknown): Promise<Reply> => {
    const reply = await call(api.url, method, path, { token, body });
    seen.push(JSON.stringify(reply.body ?? ""));
    return reply;
  };
  const passwordLogin = (email: string, password: string, from?: string) =>
    send(
      "/v1/auth/password",
      { method: "POST", body: JSON.stringify({ email, password }), headers: { "content-type": "application/json" } },
      from,
    );
  const invite = async (email: string, role?: string, token = owner.token) => {
    const made = await rest("POST", "/v1/accounts/members/invites", token, { email, ...(role ? { role } : {}) });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return made.body as { url: string; email: string; role: string; expires_at: string; account: string };
  };
  const pathOf = (url: string) => new URL(url).pathname;
  const members = async () => (await rest("GET", "/v1/accounts/members", owner.token)).body.members as any[];
  const userCount = async (email: string) =>
    (await db.sql.query("select 1 from users where lower(email) = $1", [email])).length;
  const membershipOf = async (email: string) =>
    (
      await db.sql.query<{ role: string }>(
        "select m.role from memberships m join users u on u.id = m.user_id where m.account_id = $1 and u.email = $2",
        [owner.accountId, email],
      )
    )[0]?.role;
  /** A user who exists already, with a password or (none given) without one, and a browser session of theirs. */
  async function existingUser(label: string, password?: string) {
    const user = await seedUser(api.services, label);
    const [row] = await db.sql.query<{ email: string }>("select email from users where id = $1", [user.userId]);
    if (password)
      await db.sql.query("update users set password_hash = $2 where id = $1", [
        user.userId,
        await hashPassword(password),
      ]);
    const { secret } = await api.services.browserSessions.open(user.userId);
    return { ...user, email: row!.email, cookie: secret, csrf: csrfToken(secret) };
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    owner = await seedUser(api.services, "owner");
    const me = (await rest("GET", "/v1/accounts/me", owner.token)).body;
    accountName = me.account.name;
    ownerEmail = me.user.email;
  });
  beforeEach(async () => {
    await db.sql.query("delete from sign_in_attempts");
  });
  afterAll(async () => {
    for (const agent of agents.values()) await agent.close();
    await api?.close();
    await db?.drop();
  });

  it("an invite's page names the account and the email; accepting it creates the user, joins with its role and signs in", async () => {
    const made = await invite("  Ann@Example.TEST ", "admin");
    expect(made).toMatchObject({ email: "ann@example.test", role: "admin", account: accountName });
    expect(made.url).toMatch(new RegExp(`^${api.url}/dashboard/invites/svc_inv_[\\w-]{43}$`));
    const days = (Date.parse(made.expires_at) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.99);
    expect(days).toBeLessThanOrEqual(7);
    // Only a hash of the link's token is stored.
    const token = pathOf(made.url).split("/").pop()!;
    expect(JSON.stringify(await db.sql.query("select * from account_invites"))).not.toContain(token);

    const shown = await page(pathOf(made.url));
    expect(shown.status).toBe(200);
    expect(shown.text).toContain(accountName);
    expect(shown.text).toContain("ann@example.test");
    expect(shown.text).toContain("Set password and join");

    // Refused forms create nothing.
    const differ = await form(pathOf(made.url), {
      name: "Ann",
      password: "a good password",
      password_again: "another",
    });
    expect(differ.status).toBe(400);
    expect(differ.text).toContain("The two passwords differ");
    const short = await form(pathOf(made.url), { name: "Ann", password: "short", password_again: "short" });
    expect(short.status).toBe(400);
    expect(short.text).toContain("at least 8 characters");
    const nameless = await form(pathOf(made.url), {
      name: " ",
      password: "a good password",
      password_again: "a good password",
    });
    expect(nameless.status).toBe(400);
    expect(await userCount("ann@example.test")).toBe(0);

    const joined = await form(pathOf(made.url), {
      name: "Ann Example",
      password: "a good password",
      password_again: "a good password",
    });
    expect(joined.status, joined.text).toBe(303);
    expect(joined.location).toBe("/dashboard");
    expect(joined.cookie).toMatch(/^svc_dss_/);
    expect((await page("/dashboard", joined.cookie)).status).toBe(200);
    expect(await membershipOf("ann@example.test")).toBe("admin");
    // No signed-in person made that request: the join is in the account's audit log as Ann's own act.
    const log = (await rest("GET", "/v1/accounts/audit", owner.token)).body.events as any[];
    expect(log.find((e) => e.action === "member.join")).toMatchObject({
      actor: { email: "ann@example.test", kind: "user" },
      details: { via: "invite" },
    });
    expect(JSON.stringify(log)).not.toContain(token);
    expect((await members()).find((m) => m.email === "ann@example.test")).toMatchObject({
      name: "Ann Example",
      role: "admin",
    });
    // The password is stored as a salted scrypt hash, never in clear.
    const [stored] = await db.sql.query<{ password_hash: string }>(
      "select password_hash from users where email = 'ann@example.test'",
    );
    expect(stored!.password_hash).toMatch(/^scrypt\$/);
    expect(JSON.stringify(await db.sql.query("select * from users"))).not.toContain("a good password");

    // Used: the link works once, and a second try creates nothing.
    const again = await form(pathOf(made.url), {
      name: "Ann 2",
      password: "a good password",
      password_again: "a good password",
    });
    expect(again.status).toBe(404);
    expect(again.text).toContain("already used");
    expect(again.cookie).toBeUndefined();
    const reopened = await page(pathOf(made.url));
    expect(reopened.status).toBe(404);
    expect(reopened.text).toContain("already used");
    // The claim itself is one-time too, for two acceptances racing past the page's check.
    const annId = (await db.sql.query<{ id: string }>("select id from users where email = 'ann@example.test'"))[0]!.id;
    await expect(api.services.invites.accept(token, { kind: "user", userId: annId })).rejects.toMatchObject({
      code: "INVITE_INVALID",
    });
    expect(await userCount("ann@example.test")).toBe(1);
  });

  it("an expired or unknown invite is refused with a page that says so, and nothing is created", async () => {
    const made = await invite("bob@example.test");
    expect(made.role).toBe("member");
    await db.sql.query("update account_invites set expires_at = now() - interval '1 second' where email = $1", [
      "bob@example.test",
    ]);
    const shown = await page(pathOf(made.url));
    expect(shown.status).toBe(404);
    expect(shown.text).toContain("has expired");
    const posted = await form(pathOf(made.url), {
      name: "Bob",
      password: "bob's password",
      password_again: "bob's password",
    });
    expect(posted.status).toBe(404);
    expect(posted.text).toContain("has expired");
    expect(posted.cookie).toBeUndefined();
    const expiredToken = pathOf(made.url).split("/").pop()!;
    await expect(
      api.services.invites.accept(expiredToken, { kind: "new", name: "Bob", passwordHash: await hashPassword("x") }),
    ).rejects.toMatchObject({ code: "INVITE_INVALID", message: expect.stringContaining("has expired") });
    expect(await userCount("bob@example.test")).toBe(0);

    for (const path of ["/dashboard/invites/svc_inv_unknown", `${pathOf(made.url)}x`]) {
      const unknown = await form(path, { name: "Bob", password: "bob's password", password_again: "bob's password" });
      expect(unknown.status, path).toBe(404);
      expect(unknown.text).toContain("not valid");
      expect((await page(path)).text).toContain("not valid");
    }
    expect(await userCount("bob@example.test")).toBe(0);

    // A new invite for the same email replaces the old one: it works, the old link does not come back.
    const renewed = await invite("bob@example.test");
    const joined = await form(pathOf(renewed.url), {
      name: "Bob",
      password: "bob's password",
      password_again: "bob's password",
    });
    expect(joined.status).toBe(303);
    expect(await membershipOf("bob@example.test")).toBe("member");
  });

  it("an invite is for its email only: another user, signed in or with their password, cannot take it", async () => {
    const made = await invite("carol@example.test", "member");
    const dave = await existingUser("dave", "dave's password");
    // Dave's browser is signed in: the page offers Carol's way in, not a Join as Dave.
    const shown = await page(pathOf(made.url), dave.cookie);
    expect(shown.text).toContain(`signed in as ${dave.email}`);
    expect(shown.text).not.toContain(`>Join ${accountName}<`);
    const joinAsDave = await form(pathOf(made.url), { _csrf: dave.csrf }, { cookie: dave.cookie });
    expect(joinAsDave.status).toBe(403);
    expect(joinAsDave.text).toContain("This invite is for carol@example.test");
    const withDavesPassword = await form(pathOf(made.url), { email: dave.email, password: "dave's password" });
    expect(withDavesPassword.status).toBe(403);
    expect(withDavesPassword.text).toContain("This invite is for carol@example.test only");
    expect(joinAsDave.cookie ?? withDavesPassword.cookie).toBeUndefined();
    expect(await membershipOf(dave.email)).toBeUndefined();

    // Still open for Carol.
    const carol = await form(pathOf(made.url), {
      name: "Carol",
      password: "carol's password",
      password_again: "carol's password",
    });
    expect(carol.status).toBe(303);
    expect(await membershipOf("carol@example.test")).toBe("member");
  });

  it("an existing user joins by signing in: with their password, or as their signed-in browser when they have none", async () => {
    const eve = await existingUser("eve", "eve's password");
    const made = await invite(eve.email, "viewer");
    expect((await page(pathOf(made.url))).text).toContain("Sign in and join");
    const wrong = await form(pathOf(made.url), { email: eve.email, password: "not eve's" });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain("Wrong email or password.");
    expect(await membershipOf(eve.email)).toBeUndefined();
    const right = await form(pathOf(made.url), { email: eve.email, password: "eve's password" });
    expect(right.status, right.text).toBe(303);
    expect(right.cookie).toMatch(/^svc_dss_/);
    expect(await membershipOf(eve.email)).toBe("viewer");
    // Eve is in two accounts now: the member routes act on the one she names (`svc accounts use`), else her first.
    const own = await call(api.url, "GET", "/v1/accounts/members", { token: eve.token });
    expect(own.body.members.map((m: any) => m.email)).toEqual([eve.email]);
    const named = await call(api.url, "GET", "/v1/accounts/members", {
      token: eve.token,
      headers: { "x-svc-account": owner.accountId },
    });
    expect(named.body.members.map((m: any) => m.email)).toContain("ann@example.test");
    const asViewer = await call(api.url, "POST", "/v1/accounts/members/invites", {
      token: eve.token,
      body: { email: "someone@example.test", account_id: owner.accountId },
    });
    expect(asViewer.body.code).toBe("FORBIDDEN_ROLE");

    // No password: whoever holds the link cannot give that user one; the user signs in their own way first.
    const frank = await existingUser("frank");
    const forFrank = await invite(frank.email);
    const anonymous = await page(pathOf(forFrank.url));
    expect(anonymous.text).toContain("signs in without a password");
    expect(anonymous.text).not.toContain('type="password"');
    const takeover = await form(pathOf(forFrank.url), {
      name: "Mallory",
      password: "mallory's pass",
      password_again: "mallory's pass",
    });
    expect(takeover.status).toBe(403);
    const [row] = await db.sql.query<{ password_hash: string | null }>(
      "select password_hash from users where id = $1",
      [frank.userId],
    );
    expect(row!.password_hash).toBeNull();
    expect((await page(pathOf(forFrank.url), frank.cookie)).text).toContain(`>Join ${accountName}<`);
    const forged = await form(pathOf(forFrank.url), { _csrf: "forged" }, { cookie: frank.cookie });
    expect(forged.status).toBe(403);
    expect(await membershipOf(frank.email)).toBeUndefined();
    const joined = await form(pathOf(forFrank.url), { _csrf: frank.csrf }, { cookie: frank.cookie });
    expect(joined.status).toBe(303);
    expect(await membershipOf(frank.email)).toBe("member");
  });

  it("password sign-in: the dashboard's form and POST /v1/auth/password; one answer for a wrong email or password", async () => {
    const signedIn = await form("/dashboard/sign-in/password", {
      email: "ANN@example.test",
      password: "a good password",
      next: "/dashboard/members",
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe("/dashboard/members");
    const members = await page("/dashboard/members", signedIn.cookie);
    expect(members.status).toBe(200);
    expect(members.text).toContain("carol@example.test");
    // Landing elsewhere than the dashboard is refused: it lands on the dashboard.
    const elsewhere = await form("/dashboard/sign-in/password", {
      email: "ann@example.test",
      password: "a good password",
      next: "//evil.example/dashboard",
    });
    expect(elsewhere.location).toBe("/dashboard");

    const wrongPassword = await form("/dashboard/sign-in/password", { email: "ann@example.test", password: "nope" });
    const wrongEmail = await form("/dashboard/sign-in/password", { email: "nobody@example.test", password: "nope" });
    for (const refused of [wrongPassword, wrongEmail]) {
      expect(refused.status).toBe(401);
      expect(refused.cookie).toBeUndefined();
      expect(refused.text).toContain("Wrong email or password.");
    }
    expect(wrongPassword.text.replace("ann@example.test", "x")).toBe(
      wrongEmail.text.replace("nobody@example.test", "x"),
    );
    // A user without a password signs in with none of them.
    const noPassword = await form("/dashboard/sign-in/password", { email: ownerEmail, password: "" });
    expect(noPassword.status).toBe(401);

    const minted = await passwordLogin("ann@example.test", "a good password");
    expect(minted.status).toBe(201);
    const body = JSON.parse(minted.text);
    expect(body.token).toMatch(/^svc_pat_/);
    expect(body).toMatchObject({ kind: "user", name: "cli (password login)" });
    expect((await rest("GET", "/v1/accounts/me", body.token)).body.user.email).toBe("ann@example.test");
    const log = (await rest("GET", "/v1/accounts/audit", owner.token)).body.events as any[];
    expect(log.find((e) => e.action === "token.mint" && e.details.via === "password login")).toMatchObject({
      actor: { email: "ann@example.test" },
      resource: { type: "token", id: body.id },
    });
    expect(JSON.stringify(log)).not.toContain(body.token);
    const bad = [await passwordLogin("ann@example.test", "nope"), await passwordLogin("nobody@example.test", "nope")];
    for (const refused of bad) {
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.text)).toEqual({ error: "wrong email or password", code: "UNAUTHENTICATED" });
    }
  });

  it("the 11th try in a minute is refused, per email and per client address, whatever the password", async () => {
    // Per address: ten tries with ten emails from one address, then even the right password from it is refused.
    for (let i = 0; i < 10; i++)
      expect((await passwordLogin(`x${i}@example.test`, "nope", "127.0.0.23")).status).toBe(401);
    const eleventh = await passwordLogin("ann@example.test", "a good password", "127.0.0.23");
    expect(eleventh.status).toBe(429);
    expect(JSON.parse(eleventh.text)).toEqual({
      error: "too many sign-in attempts: wait a minute and try again",
      code: "RATE_LIMITED",
    });
    const dashboard = await form(
      "/dashboard/sign-in/password",
      { email: "ann@example.test", password: "a good password" },
      {
        from: "127.0.0.23",
      },
    );
    expect(dashboard.status).toBe(429);
    expect(dashboard.text).toContain("Too many sign-in attempts");
    expect(dashboard.cookie).toBeUndefined();
    // Another address is not held back by it.
    expect((await passwordLogin("ann@example.test", "a good password", "127.0.0.24")).status).toBe(201);

    // Per email: Carol's tries from eleven addresses, one each; the 11th is refused, the right password included.
    await db.sql.query("delete from sign_in_attempts");
    for (let i = 0; i < 10; i++)
      expect((await passwordLogin("carol@example.test", "nope", `127.0.0.${30 + i}`)).status).toBe(401);
    expect((await passwordLogin("carol@example.test", "carol's password", "127.0.0.40")).status).toBe(429);
    const viaInvitePage = await form(
      "/dashboard/sign-in/password",
      {
        email: "Carol@example.test",
        password: "carol's password",
      },
      { from: "127.0.0.41" },
    );
    expect(viaInvitePage.status).toBe(429);
    // Another email from those addresses still signs in.
    expect((await passwordLogin("ann@example.test", "a good password", "127.0.0.40")).status).toBe(201);
    // A minute later Carol is let in again.
    await db.sql.query("update sign_in_attempts set at = at - interval '61 seconds'");
    expect((await passwordLogin("carol@example.test", "carol's password", "127.0.0.42")).status).toBe(201);
  });

  it("role changes and removal: admins manage members, only an owner makes or unmakes owners, an account keeps one", async () => {
    const member = (email: string) => `/v1/accounts/members/${encodeURIComponent(email)}`;
    const ann = JSON.parse((await passwordLogin("ann@example.test", "a good password")).text).token as string;
    const carol = JSON.parse((await passwordLogin("carol@example.test", "carol's password")).text).token as string;

    // Everyone of the account lists its members, with email, name, role and when they joined.
    const listed = await rest("GET", "/v1/accounts/members", carol);
    expect(listed.status).toBe(200);
    expect(listed.body.members.find((m: any) => m.email === "ann@example.test")).toEqual({
      email: "ann@example.test",
      name: "Ann Example",
      role: "admin",
      joined: expect.any(String),
    });

    // Ann (admin) manages members and admins, never an owner.
    const demoted = await rest("PATCH", member("carol@example.test"), ann, { role: "viewer" });
    expect(demoted.status).toBe(200);
    expect(demoted.body).toMatchObject({ email: "carol@example.test", role: "viewer" });
    for (const [method, path, body] of [
      ["PATCH", member("carol@example.test"), { role: "owner" }],
      ["PATCH", member("ann@example.test"), { role: "owner" }],
      ["PATCH", member(ownerEmail), { role: "member" }],
      ["DELETE", member(ownerEmail), undefined],
      ["POST", "/v1/accounts/members/invites", { email: "new-owner@example.test", role: "owner" }],
    ] as const) {
      const refused = await rest(method, path, ann, body);
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(refused.body.code).toBe("FORBIDDEN_ROLE");
    }
    // Carol (viewer, then member) manages nobody.
    for (const role of ["viewer", "member"]) {
      await rest("PATCH", member("carol@example.test"), owner.token, { role });
      const refused = await rest("POST", "/v1/accounts/members/invites", carol, { email: "z@example.test" });
      expect(refused.status, role).toBe(403);
      expect(refused.body.code).toBe("FORBIDDEN_ROLE");
      expect((await rest("DELETE", member("bob@example.test"), carol)).body.code).toBe("FORBIDDEN_ROLE");
    }
    expect(await membershipOf("bob@example.test")).toBe("member");

    // The last owner can be neither demoted nor removed, not even by themselves.
    for (const [method, body] of [
      ["PATCH", { role: "admin" }],
      ["DELETE", undefined],
    ] as const) {
      const refused = await rest(method, member(ownerEmail), owner.token, body);
      expect(refused.status, method).toBe(409);
      expect(refused.body.code).toBe("LAST_OWNER");
    }
    expect(await membershipOf(ownerEmail)).toBe("owner");
    // With a second owner, the first may step down; then the second is the last.
    expect((await rest("PATCH", member("ann@example.test"), owner.token, { role: "owner" })).body.role).toBe("owner");
    expect((await rest("PATCH", member(ownerEmail), owner.token, { role: "admin" })).status).toBe(200);
    expect((await rest("DELETE", member("ann@example.test"), ann)).body.code).toBe("LAST_OWNER");
    expect((await rest("PATCH", member(ownerEmail), ann, { role: "owner" })).status).toBe(200);

    // Unknown members, members invited twice, bad roles and project tokens.
    expect((await rest("DELETE", member("nobody@example.test"), owner.token)).body.code).toBe("MEMBER_NOT_FOUND");
    expect((await rest("PATCH", member("nobody@example.test"), owner.token, { role: "member" })).status).toBe(404);
    const twice = await rest("POST", "/v1/accounts/members/invites", owner.token, { email: "Bob@example.test" });
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe("ALREADY_MEMBER");
    expect(
      (await rest("POST", "/v1/accounts/members/invites", owner.token, { email: "x@example.test", role: "boss" }))
        .status,
    ).toBe(400);
    expect((await rest("POST", "/v1/accounts/members/invites", owner.token, { email: "not an email" })).status).toBe(
      400,
    );
    const project = await rest("POST", "/v1/projects", owner.token, { name: "People" });
    const projectToken = (await rest("POST", `/v1/projects/${project.body.id}/cli-token`, owner.token, {})).body.token;
    expect((await rest("GET", "/v1/accounts/members", projectToken)).body.code).toBe("PROJECT_TOKEN_NOT_ALLOWED");

    // Removed: Bob is gone from the list, and from the account's projects.
    const bobToken = JSON.parse((await passwordLogin("bob@example.test", "bob's password")).text).token as string;
    expect((await rest("GET", `/v1/projects/${project.body.id}`, bobToken)).status).toBe(200);
    expect((await rest("DELETE", member("bob@example.test"), ann)).status).toBe(204);
    expect((await members()).map((m) => m.email)).not.toContain("bob@example.test");
    await new Promise((r) => setTimeout(r, 5100)); // the membership cache's TTL
    expect((await rest("GET", `/v1/projects/${project.body.id}`, bobToken)).status).toBe(403);
  });

  it("no password and no hash of one is in any answer", () => {
    expect(seen.length).toBeGreaterThan(50);
    for (const body of seen) {
      expect(body).not.toMatch(/scrypt\$/);
      expect(body).not.toContain("password_hash");
      for (const password of ["a good password", "carol's password", "eve's password", "dave's password"])
        expect(body).not.toContain(password);
    }
  });
});
