import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootstrapAdmin } from "../api/accounts/bootstrap.ts";
import { csrfToken } from "../api/dashboard/browser-sessions.ts";
import { SESSION_COOKIE } from "../api/dashboard/session-auth.ts";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { TOKEN_PREFIX } from "../protocol/token.ts";
import { call, seedMember, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";

type Person = { userId: string; accountId: string; token: string };

/**
 * Issue 32, roles: what each role of an account may do on its projects, over real HTTP on PGlite and PostgreSQL.
 * Viewer reads; member also opens and merges CRs and starts sessions; admin also sets secrets; a project token a
 * person minted acts as them, with their role; a sandbox's token never merges.
 */
describe.each(databaseKinds("postgres"))("roles on a project (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let owner: Person;
  let admin: Person;
  let member: Person;
  let viewer: Person;
  let project: { id: string; repo_url: string };
  let work: WorkRepo;
  let branches = 0;

  const as = (person: { token: string }) => ({
    get: (path: string) => call(api.url, "GET", `/v1/projects/${project.id}${path}`, { token: person.token }),
    post: (path: string, body: unknown = {}) =>
      call(api.url, "POST", `/v1/projects/${project.id}${path}`, { token: person.token, body }),
    put: (path: string, body: unknown) =>
      call(api.url, "PUT", `/v1/projects/${project.id}${path}`, { token: person.token, body }),
  });
  const refusedForRole = (res: { status: number; body: { code?: string } }, role: string, needed: string) => {
    expect([res.status, res.body.code]).toEqual([403, "FORBIDDEN_ROLE"]);
    expect(res.body).toMatchObject({ role, required_role: needed });
  };

  /** A branch one commit ahead of main, pushed by the owner, and a CR of it opened by `opener`. */
  async function openCr(opener: Person = member): Promise<number> {
    branches += 1;
    const name = `topic-${branches}`;
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(name, { create: true, from: "origin/main" });
    await work.commit(name, { [`${name}.txt`]: `${name}\n` });
    await work.pushed(name);
    const opened = await as(opener).post("/change-requests", { title: name, head_ref: name });
    expect(opened.status, JSON.stringify(opened.body)).toBe(201);
    return opened.body.number;
  }
  const statusOf = async (n: number) => (await as(owner).get(`/change-requests/${n}`)).body.change_request.status;

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    owner = await seedUser(api.services, "owner");
    admin = await seedMember(api.services, owner.accountId, "admin");
    member = await seedMember(api.services, owner.accountId, "member");
    viewer = await seedMember(api.services, owner.accountId, "viewer");
    project = (await call(api.url, "POST", "/v1/projects", { token: owner.token, body: { name: "Roles" } })).body;
    work = await workRepo(authedUrl(project.repo_url, owner.token));
    await work.commit("initial", {
      "README.md": "hello\n",
      "svc.toml": '[[triggers]]\nslug = "nightly"\nschedule = "0 3 * * *"\nprompt = "Upgrade"\n',
    });
    await work.pushed("main");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("a viewer reads CRs, their diffs and secrets' names, but merges, opens, starts and sets nothing", async () => {
    const n = await openCr();
    expect(
      (await as(viewer).get("/change-requests")).body.change_requests.map((c: { number: number }) => c.number),
    ).toContain(n);
    expect((await as(viewer).get(`/change-requests/${n}`)).body.change_request.status).toBe("open");
    expect((await as(viewer).get(`/change-requests/${n}/diff`)).status).toBe(200);
    expect((await as(viewer).get("/secrets")).status).toBe(200);

    refusedForRole(await as(viewer).post(`/change-requests/${n}/merge`), "viewer", "member");
    refusedForRole(await as(viewer).post("/change-requests", { title: "x", head_ref: "main2" }), "viewer", "member");
    refusedForRole(await as(viewer).post(`/change-requests/${n}/comments`, { body: "lgtm" }), "viewer", "member");
    refusedForRole(await as(viewer).post("/sessions"), "viewer", "member");
    refusedForRole(await as(viewer).put("/secrets", { secrets: { API_KEY: "v" } }), "viewer", "admin");
    const refused = await as(viewer).post(`/change-requests/${n}/merge`);
    expect(refused.body.error).toBe("this takes the member role or above in this account; yours is viewer");
    expect(await statusOf(n)).toBe("open");
  });

  it("a member merges; setting secrets takes an admin", async () => {
    const n = await openCr();
    const merged = await as(member).post(`/change-requests/${n}/merge`);
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
    expect(merged.body).toMatchObject({ status: "merged", merged_by: member.userId });

    refusedForRole(await as(member).put("/secrets", { secrets: { API_KEY: "v" } }), "member", "admin");
    const set = await as(admin).put("/secrets", { secrets: { API_KEY: "v" } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.names).toEqual(["API_KEY"]);
    // Values never leave the API, whoever reads: a viewer sees the name only.
    const listed = await as(viewer).get("/secrets");
    expect(listed.body.secrets.map((s: { name: string }) => s.name)).toContain("API_KEY");
    expect(JSON.stringify(listed.body)).not.toContain('"v"');
  });

  it("a project token a person minted merges as that person, and not when the person is a viewer", async () => {
    const memberToken = (await as(member).post("/cli-token", { name: "ci" })).body.token as string;
    const n = await openCr();
    const merged = await as({ token: memberToken }).post(`/change-requests/${n}/merge`);
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
    expect(merged.body).toMatchObject({ status: "merged", merged_by: member.userId });

    const viewerMinted = await as(viewer).post("/cli-token", { name: "ci" });
    expect(viewerMinted.status).toBe(201);
    const other = await openCr();
    refusedForRole(
      await as({ token: viewerMinted.body.token }).post(`/change-requests/${other}/merge`),
      "viewer",
      "member",
    );
    // It reads as its viewer does.
    expect((await as({ token: viewerMinted.body.token }).get(`/change-requests/${other}`)).status).toBe(200);
    expect(await statusOf(other)).toBe("open");
  });

  it("a sandbox's token never merges, though its person is the account's owner", async () => {
    const sandbox = await seedLiveSandbox(api.services.sql, owner, project.id, { tokens: api.services.tokens });
    const agent = { token: sandbox.sessionToken! };
    const n = await openCr();
    // It works on the project's CRs as its person may, but a merge is refused whatever the role.
    const edited = await call(api.url, "PATCH", `/v1/projects/${project.id}/change-requests/${n}`, {
      token: agent.token,
      body: { title: "edited by the agent" },
    });
    expect(edited.status).toBe(200);
    const refused = await as(agent).post(`/change-requests/${n}/merge`);
    expect([refused.status, refused.body.code]).toEqual([403, "PROJECT_TOKEN_NOT_ALLOWED"]);
    expect(await statusOf(n)).toBe("open");
  });

  it("git: a viewer fetches but cannot push; a member pushes", async () => {
    const asViewer = await workRepo(authedUrl(project.repo_url, viewer.token));
    expect((await asViewer.git(["fetch", "-q", "origin", "main"], { reject: false })).code).toBe(0);
    await asViewer.checkout("from-viewer", { create: true, from: "FETCH_HEAD" });
    await asViewer.commit("viewer's", { "viewer.txt": "no\n" });
    const refused = await asViewer.push("from-viewer");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("this takes the member role or above in this account; yours is viewer");

    const asMember = await workRepo(authedUrl(project.repo_url, member.token));
    await asMember.git(["fetch", "-q", "origin", "main"]);
    await asMember.checkout("from-member", { create: true, from: "FETCH_HEAD" });
    await asMember.commit("member's", { "member.txt": "yes\n" });
    await asMember.pushed("from-member");
  });

  /** A dashboard page or form post as `person`'s browser. */
  async function page(person: Person, path: string, post = false) {
    const { secret } = await api.services.browserSessions.open(person.userId);
    return fetch(`${api.url}/dashboard/projects/${project.id}${path}`, {
      method: post ? "POST" : "GET",
      headers: { cookie: `${SESSION_COOKIE}=${secret}`, "content-type": "application/x-www-form-urlencoded" },
      body: post ? `_csrf=${csrfToken(secret)}` : undefined,
      redirect: "manual",
    });
  }

  it("the project page shows a control only to the roles that may use it", async () => {
    const shown = async (person: Person) => {
      const text = await (await page(person, "")).text();
      return { newSession: text.includes(">New session</button>"), fire: text.includes('aria-label="Fire nightly"') };
    };
    expect(await shown(viewer)).toEqual({ newSession: false, fire: false });
    expect(await shown(member)).toEqual({ newSession: true, fire: false });
    expect(await shown(admin)).toEqual({ newSession: true, fire: true });
  });

  it("the dashboard refuses a viewer's Merge with a page that names both roles", async () => {
    const n = await openCr();
    const res = await page(viewer, `/crs/${n}/merge`, true);
    expect(res.status).toBe(403);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(await res.text()).toContain("this takes the member role or above in this account; yours is viewer");
    expect(await statusOf(n)).toBe("open");
  });

  it("the self-host admin is its account's owner, and a person removed from the account loses their tokens' reach", async () => {
    const secret = newSecret(TOKEN_PREFIX);
    const adminId = await bootstrapAdmin(api.services, hashSecret(secret));
    expect((await api.services.accounts.accounts(adminId)).map((a) => a.role)).toEqual(["owner"]);

    const leaving = await seedMember(api.services, owner.accountId, "member", "leaving");
    const minted = (await as(leaving).post("/cli-token", { name: "script" })).body.token as string;
    expect((await as({ token: minted }).get("")).status).toBe(200);
    await db.sql.query("delete from memberships where user_id = $1", [leaving.userId]);
    // Membership lookups are cached for 5 s per process, as they were before roles.
    await expect
      .poll(async () => (await as({ token: minted }).get("")).body.code, { timeout: 8000, interval: 500 })
      .toBe("NOT_A_MEMBER");
  });
});
