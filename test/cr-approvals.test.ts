import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Services } from "../api/services.ts";
import { ChangeRequest } from "../protocol/change-request.ts";
import { CrApproval, CrApprovalList } from "../protocol/cr-approval.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";

const REVIEW_MANIFEST = "[review]\nrequired_approvals = 1\n";

/** Another person of the same account, with a user token: the one who approves. */
async function seedMember(services: Services, accountId: string, label: string) {
  const [user] = await services.sql.query<{ id: string; email: string }>(
    "insert into users (email, name) values ($1, $2) returning id, email",
    [`${label}-${accountId.slice(0, 8)}@example.test`, label],
  );
  await services.sql.query("insert into memberships (account_id, user_id, role) values ($1, $2, 'member')", [
    accountId,
    user!.id,
  ]);
  const { token } = await services.tokens.mint({ userId: user!.id, name: "test" });
  return { userId: user!.id, email: user!.email, accountId, token };
}

type Person = { userId: string; accountId: string; token: string };

/** A project whose default branch asks for one approval, with its author and a second member. */
async function approvalProject(api: TestApi) {
  const author = await seedUser(api.services, "author");
  const reviewer = await seedMember(api.services, author.accountId, "reviewer");
  const created = await call(api.url, "POST", "/v1/projects", { token: author.token, body: { name: "Reviewed" } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const projectId: string = created.body.id;
  const work = await workRepo(authedUrl(created.body.repo_url, author.token));
  await work.commit("initial", { "README.md": "hello\n" });
  await work.pushed("main");
  // Landed before any approval is asked for: from here on, every merge needs one.
  await work.commit("review", { "svc.toml": REVIEW_MANIFEST });
  await landOnDefault(api.url, author.token, projectId, work, "require approvals");
  let branches = 0;

  const crs = (suffix = "") => `/v1/projects/${projectId}/change-requests${suffix}`;
  const as = (who: Pick<Person, "token">, method: string, suffix: string, body?: unknown) =>
    call(api.url, method, crs(suffix), { token: who.token, body });
  const crOf = async (n: number) => ChangeRequest.parse((await as(author, "GET", `/${n}`)).body.change_request);

  /** Pushes a new commit to `branch` (a fresh branch off main unless `existing`). */
  async function push(branch: string, existing = false) {
    await work.git(["fetch", "-q", "origin"]);
    if (!existing) await work.checkout(branch, { create: true, from: "origin/main" });
    else await work.checkout(branch);
    branches += 1;
    await work.commit(`work ${branches} on ${branch}`, { [`${branch}.txt`]: `${branches}\n` });
    await work.pushed(branch);
  }

  return {
    author,
    reviewer,
    projectId,
    as,
    crOf,
    push,
    approvalsOf: async (n: number) => CrApprovalList.parse((await as(author, "GET", `/${n}/approvals`)).body),

    /** A CR the author opens from a new branch with one commit. */
    async open(branch: string): Promise<number> {
      await push(branch);
      const opened = await as(author, "POST", "", { title: `CR ${branch}`, head_ref: branch });
      expect(opened.status, JSON.stringify(opened.body)).toBe(201);
      return opened.body.number;
    },
  };
}

/** DESIGN "Teams": `[review] required_approvals`, `POST …/approve`, the merge gate's APPROVAL_REQUIRED. */
describe.each(databaseKinds("postgres"))("CR approvals (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let p: Awaited<ReturnType<typeof approvalProject>>;

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    p = await approvalProject(api);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("needs another member's approval: the author's is refused (403), a merge without one is 409, with one it merges", async () => {
    const n = await p.open("needs-one");
    expect(await p.crOf(n)).toMatchObject({ approvals: 0, required_approvals: 1, mergeable: false });

    const own = await p.as(p.author, "POST", `/${n}/approve`);
    expect([own.status, own.body.code]).toEqual([403, "SELF_APPROVAL"]);
    expect(await p.approvalsOf(n)).toEqual([]);

    const refused = await p.as(p.author, "POST", `/${n}/merge`, {});
    expect([refused.status, refused.body.code]).toEqual([409, "APPROVAL_REQUIRED"]);
    expect(refused.body).toMatchObject({ required: 1, given: 0 });
    expect(refused.body.error).toMatch(/needs 1 approval of head [0-9a-f]{12} to merge and has 0/);
    expect(refused.body.error).toContain(`svc cr approve ${n}`);

    const head = (await p.crOf(n)).head_commit_sha!;
    const approved = await p.as(p.reviewer, "POST", `/${n}/approve`);
    expect(approved.status, JSON.stringify(approved.body)).toBe(201);
    expect(CrApproval.parse(approved.body)).toEqual({
      user: p.reviewer.email,
      user_id: p.reviewer.userId,
      head_sha: head,
      counted: true,
      created_at: expect.any(String),
    });
    // Twice is once.
    const again = await p.as(p.reviewer, "POST", `/${n}/approve`, { head_sha: head });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(approved.body);
    expect(await p.approvalsOf(n)).toEqual([approved.body]);
    expect(await p.crOf(n)).toMatchObject({ approvals: 1, required_approvals: 1, mergeable: true });
    // The list of CRs counts them in the same way.
    const listed = (await p.as(p.author, "GET", "?status=open")).body.change_requests;
    expect(listed.find((c: ChangeRequest) => c.number === n)).toMatchObject({ approvals: 1, mergeable: true });

    const merged = await p.as(p.author, "POST", `/${n}/merge`, { head_sha: head });
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
    expect(merged.body.status).toBe("merged");
    // A merged CR is approved no more.
    const late = await p.as(p.reviewer, "POST", `/${n}/approve`);
    expect([late.status, late.body.code]).toEqual([409, "CR_NOT_OPEN"]);
  });

  it("a push to the head leaves the approval behind: listed, no longer counted, and the merge is 409 again", async () => {
    const n = await p.open("pushed-after");
    const first = (await p.as(p.reviewer, "POST", `/${n}/approve`)).body;
    expect((await p.crOf(n)).mergeable).toBe(true);

    await p.push("pushed-after", true);
    const cr = await p.crOf(n);
    expect(cr.head_commit_sha).not.toBe(first.head_sha);
    expect(cr).toMatchObject({ approvals: 0, mergeable: false });
    expect(await p.approvalsOf(n)).toEqual([{ ...first, counted: false }]);
    const refused = await p.as(p.author, "POST", `/${n}/merge`, {});
    expect([refused.status, refused.body.code]).toEqual([409, "APPROVAL_REQUIRED"]);

    // Approving the head the reviewer saw, which is no longer the head, approves nothing.
    const stale = await p.as(p.reviewer, "POST", `/${n}/approve`, { head_sha: first.head_sha });
    expect([stale.status, stale.body.code]).toEqual([409, "HEAD_MOVED"]);
    const second = await p.as(p.reviewer, "POST", `/${n}/approve`, { head_sha: cr.head_commit_sha });
    expect(second.status).toBe(201);
    expect((await p.approvalsOf(n)).map((a) => [a.head_sha, a.counted])).toEqual([
      [first.head_sha, false],
      [cr.head_commit_sha, true],
    ]);
    expect((await p.as(p.author, "POST", `/${n}/merge`, {})).status).toBe(200);
  });

  it("a sandbox's token never approves, not even for a member other than the author; a member's own project token does", async () => {
    const n = await p.open("by-token");
    // The reviewer's session: its token acts for the reviewer, who may approve, and still it is refused.
    const sandbox = await seedLiveSandbox(api.services.sql, p.reviewer, p.projectId, { tokens: api.services.tokens });
    const bySandbox = await p.as({ token: sandbox.sessionToken! }, "POST", `/${n}/approve`);
    expect([bySandbox.status, bySandbox.body.code]).toEqual([403, "PROJECT_TOKEN_NOT_ALLOWED"]);
    expect(await p.approvalsOf(n)).toEqual([]);
    expect((await p.as({ token: sandbox.sessionToken! }, "GET", `/${n}/approvals`)).status).toBe(200);

    const minted = await api.services.tokens.mint({ userId: p.reviewer.userId, projectId: p.projectId, name: "ci" });
    const byProjectToken = await p.as({ token: minted.token }, "POST", `/${n}/approve`);
    expect(byProjectToken.status, JSON.stringify(byProjectToken.body)).toBe(201);
    expect(byProjectToken.body).toMatchObject({ user_id: p.reviewer.userId, counted: true });
  });

  it("an approval counts only while its person is a member of the account", async () => {
    const n = await p.open("member-left");
    const leaving = await seedMember(api.services, p.author.accountId, "leaving");
    expect((await p.as(leaving, "POST", `/${n}/approve`)).status).toBe(201);
    expect(await p.crOf(n)).toMatchObject({ approvals: 1, mergeable: true });
    await api.services.sql.query("delete from memberships where user_id = $1", [leaving.userId]);
    // The merge gate counts afresh: refused at once.
    const refused = await p.as(p.author, "POST", `/${n}/merge`, {});
    expect([refused.status, refused.body.code]).toEqual([409, "APPROVAL_REQUIRED"]);
    expect((await p.approvalsOf(n)).map((a) => a.counted)).toEqual([false]);
    // A CR read shows the count as it was for at most a couple of seconds (approvals-store.ts, SHOWN_COUNT_MS).
    await expect
      .poll(async () => p.crOf(n), { timeout: 5000, interval: 250 })
      .toMatchObject({ approvals: 0, mergeable: false });
  });
});

/** The real `svc` binary, and the dashboard's CR page over plain HTTP (its form, its cookie), on PGlite. */
describe("svc cr approve and the CR page's Approve", () => {
  const home = cliHome();
  let db: TestDatabase;
  let api: TestApi;
  let p: Awaited<ReturnType<typeof approvalProject>>;
  let env: CliEnv;

  const cli = (who: Pick<Person, "token">, args: string[]) =>
    svc([...args, "--project", p.projectId], { env: { ...env, SVC_CLI_TOKEN: who.token } });

  /** A browser session of `who`, as the sign-in link's Continue opens one: its cookie. */
  async function signIn(who: Pick<Person, "token">): Promise<string> {
    const link = await call(api.url, "POST", "/v1/dashboard/sign-in-links", { token: who.token, body: {} });
    expect(link.status).toBe(201);
    const code = new URL(link.body.url).searchParams.get("code")!;
    const res = await fetch(`${api.url}/dashboard/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: api.url },
      body: new URLSearchParams({ code }),
      redirect: "manual",
    });
    expect(res.status).toBe(303);
    return res.headers.get("set-cookie")!.split(";")[0]!;
  }

  async function page(cookie: string, n: number) {
    const res = await fetch(`${api.url}/dashboard/projects/${p.projectId}/crs/${n}`, { headers: { cookie } });
    expect(res.status).toBe(200);
    return res.text();
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    p = await approvalProject(api);
    env = { ...home.env, SVC_API_URL: `${api.url}/v1` };
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("svc cr approve: the author is refused, the merge says what is missing, a member approves, show says 1/1", async () => {
    const n = await p.open("cli");
    const own = await cli(p.author, ["cr", "approve", String(n)]);
    expect(own.code).toBe(1);
    expect(own.stderr).toContain("(SELF_APPROVAL, HTTP 403)");

    const merge = await cli(p.author, ["cr", "merge", String(n)]);
    expect(merge.code).toBe(1);
    expect(merge.stderr).toMatch(/needs 1 approval of head [0-9a-f]{12} to merge and has 0/);
    expect(merge.stderr).toContain(`svc cr approve ${n}' (APPROVAL_REQUIRED, HTTP 409)`);
    expect((await cli(p.author, ["cr", "show", String(n)])).stdout).toContain(
      `approved: 0/1 approvals of its head (svc cr approve ${n})`,
    );

    const head = (await p.crOf(n)).head_commit_sha!;
    const approved = await cli(p.reviewer, ["cr", "approve", `#${n}`]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).toContain(`✓ approved CR #${n} at ${head.slice(0, 12)}: 1/1 approvals`);
    expect(approved.stdout).toBe(head);
    const json = await cli(p.reviewer, ["cr", "approve", String(n), "--json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual((await p.approvalsOf(n))[0]);
    expect((await cli(p.author, ["cr", "show", String(n)])).stdout).toContain("approved: 1/1 approvals of its head");
    expect((await cli(p.author, ["cr", "merge", String(n)])).code).toBe(0);
  });

  it("the CR page: no Approve for the author and Merge disabled, needing an approval; the reviewer's Approve enables it", async () => {
    const n = await p.open("page");
    const authorCookie = await signIn(p.author);
    const before = await page(authorCookie, n);
    expect(before).toContain('id="approvals-count">0/1</span>');
    expect(before).not.toContain(">Approve</button>");
    expect(before).toMatch(/id="merge-button"[^>]* disabled>Merge<\/button>/);
    expect(before).toContain("Needs 1 approval of its current head (0 so far).");

    const reviewerCookie = await signIn(p.reviewer);
    const form = await page(reviewerCookie, n);
    expect(form).toContain(">Approve</button>");
    const csrf = /name="_csrf" value="([^"]+)"/.exec(form)![1]!;
    const head = (await p.crOf(n)).head_commit_sha!;
    expect(form).toContain(`<input type="hidden" name="head_sha" value="${head}">`);
    const posted = await fetch(`${api.url}/dashboard/projects/${p.projectId}/crs/${n}/approve`, {
      method: "POST",
      headers: { cookie: reviewerCookie, "content-type": "application/x-www-form-urlencoded", origin: api.url },
      body: new URLSearchParams({ _csrf: csrf, head_sha: head }),
      redirect: "manual",
    });
    expect(posted.status).toBe(303);
    expect((await p.crOf(n)).approvals).toBe(1);
    const reviewerAfter = await page(reviewerCookie, n);
    expect(reviewerAfter).toContain("You approved this head.");
    expect(reviewerAfter).not.toContain(">Approve</button>");

    const after = await page(authorCookie, n);
    expect(after).toContain('id="approvals-count">1/1</span>');
    expect(after).toContain(`${p.reviewer.email}</strong> approved <code>${head.slice(0, 12)}</code>`);
    expect(after).toMatch(/id="merge-button"[^>]*>Merge<\/button>/);
    expect(after).not.toMatch(/id="merge-button"[^>]* disabled>/);
  });
});
