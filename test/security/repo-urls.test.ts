import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { remoteHostOf } from "../../api/git/remote-address.ts";
import { createRepositories } from "../../api/git/repositories.ts";
import { git } from "../../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { cliHome, svc } from "../support/cli.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "../support/git-fixture.ts";
import { serveGitRequest } from "../support/git-server.ts";

/**
 * Issue 10, item 2: the API's disk holds every project's repository, so an external project's `repo_url` must
 * never be something git reads from that disk. Before the fix, a project created with
 * `file://<dataDir>/repos/<other>.git` read the other project's branches, and its merge moved the other
 * project's main past that repository's pre-receive hook.
 */
describe("no project reaches another project's repository through its repo_url", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let victim: { id: string; repo_url: string };
  let victimDir: string;
  let victimMain: string;

  const tip = async (branch: string) =>
    (
      await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], { dir: victimDir, okCodes: [1] })
    ).stdout.trim();
  const projectIds = async () =>
    (await call(api.url, "GET", "/v1/projects", { token: user.token })).body.projects.map((p: { id: string }) => p.id);

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    victim = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Victim" } })).body;
    victimDir = api.services.repos.managedDir(victim.id);
    const work = await workRepo(authedUrl(victim.repo_url, user.token));
    victimMain = await work.commit("initial", { "README.md": "hello\n" });
    await work.checkout("topic", { create: true });
    await work.commit("topic", { "topic.txt": "t\n" });
    await work.pushed("main", "topic");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("refuses local paths, file URLs, transport helpers and options with 400, creating nothing", async () => {
    const before = await projectIds();
    const marker = join(mkdtempSync(join(tmpdir(), "svc-pwn-")), "pwned");
    for (const repo_url of [
      `file://${victimDir}`,
      `file://localhost${victimDir}`,
      `FILE://${victimDir}`,
      `file:${victimDir}`,
      "file:victim.git",
      victimDir,
      `${victimDir}/`,
      `${api.dataDir}/repos/../repos/${victim.id}.git`,
      `./repos/${victim.id}.git`,
      `../repos/${victim.id}.git`,
      `repos/${victim.id}.git`,
      `${victim.id}.git`,
      "~/repo.git",
      "C:/repos/x.git",
      "C:\\repos\\x.git",
      "host:repo.git",
      `ext::sh -c touch% ${marker}`,
      "fd::3",
      "fd::3,4/repo",
      "https::example.test/repo",
      "-uhttp://example.test/x",
      "--upload-pack=touch /tmp/x",
      "-oProxyCommand=touch /tmp/x@host:repo",
      "ssh://-oProxyCommand=x/repo",
      "ftp://example.test/repo.git",
      "https:///repo.git",
      "http:example.test/repo.git",
      "git@:repo.git",
    ]) {
      const res = await call(api.url, "POST", "/v1/projects", {
        token: user.token,
        body: { name: "Thief", repo_url },
      });
      expect(res.status, repo_url).toBe(400);
      expect(res.body.field, repo_url).toBe("repo_url");
    }
    expect(await projectIds()).toEqual(before);
    expect(existsSync(join(api.dataDir, "mirrors"))).toBe(false);
    expect(existsSync(marker)).toBe(false);
    expect(await tip("main")).toBe(victimMain);
  });

  it("refuses them from `svc projects create --repo` too (exit 1, the rule in the message)", async () => {
    const { env } = cliHome();
    const res = await svc(["projects", "create", "Thief", "--repo", `file://${victimDir}`], {
      env: { ...env, SVC_CLI_TOKEN: user.token, SVC_API_URL: `${api.url}/v1` },
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/repo_url/);
    expect(res.stderr).toMatch(/local path/);
  });

  it("accepts https, http, ssh and git URLs and scp-like user@host:path", async () => {
    // Hosts this machine can resolve without DNS: public literal addresses, and the ones the test API allows.
    for (const repo_url of [
      "https://140.82.112.3/org/repo.git",
      "https://bot:secret@git.example.test/org/repo.git",
      "http://127.0.0.1:9/repo.git",
      "ssh://git@git.example.test:2222/org/repo.git",
      "ssh://[2001:db8::1]/srv/repo.git",
      "git://git.example.test/repo.git",
      "git@140.82.112.3:org/repo.git",
      "deploy@git.example.test:/srv/git/repo.git",
    ]) {
      const res = await call(api.url, "POST", "/v1/projects", {
        token: user.token,
        body: { name: `ok ${repo_url}`, repo_url },
      });
      expect(res.status, repo_url).toBe(201);
      expect(res.body.repo_kind).toBe("external");
    }
  });

  it("git itself refuses the file transport for external remotes (a row stored before the rule)", async () => {
    // Rows created before the URL rule existed keep their URL: the mirror's git must not follow it either.
    for (const repo_url of [`file://${victimDir}`, victimDir]) {
      const [row] = await db.sql.query<{ id: string }>(
        `insert into projects (account_id, slug, name, repo_kind, repo_url, default_branch, created_by)
         values ($1, $2, 'Legacy', 'external', $3, 'main', $4) returning id`,
        [user.accountId, `legacy-${(await projectIds()).length}`, repo_url, user.userId],
      );
      const crs = `/v1/projects/${row!.id}/change-requests`;
      const cr = await call(api.url, "POST", crs, {
        token: user.token,
        body: { title: "take over", head_ref: "topic" },
      });
      expect(cr.status, repo_url).toBe(201);
      // The other project's branches stay unseen: the repository is unreachable for this project.
      expect(cr.body, repo_url).toMatchObject({ head_commit_sha: null, base_commit_sha: null });
      const merge = await call(api.url, "POST", `${crs}/${cr.body.cr_id}/merge`, { token: user.token });
      expect(merge.status, repo_url).toBe(502);
      expect(await tip("main"), repo_url).toBe(victimMain);
    }
  });
});

/** A git host on loopback (smart HTTP) that records each request's path and Authorization header. */
async function recordingGitHost(root: string) {
  const seen: { path: string; authorization?: string }[] = [];
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? "", authorization: req.headers.authorization });
    serveGitRequest(req, res, root, "external");
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, port, seen, close: () => closeServer(server) };
}

async function listen(server: Server | NetServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

const basic = (token: string) => `Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`;

/**
 * Issue 26, item 3: `repo_url` made the API connect wherever its host pointed (a port scan of the API's own
 * network through project creation), the stack-wide credential served any account, and git carried tokens along a
 * redirect to another origin.
 */
describe("repository URLs reach only what the stack allows, with the credentials it allows", () => {
  let db: TestDatabase;
  /** Allows no repository host, as a stack does by default. */
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let host: Awaited<ReturnType<typeof recordingGitHost>>;
  let root: string;
  let dev: WorkRepo;
  const extra: { close(): Promise<void> }[] = [];

  const projectIds = async (base = api.url) =>
    (await call(base, "GET", "/v1/projects", { token: user.token })).body.projects.map((p: { id: string }) => p.id);
  const create = (base: string, token: string, repo_url: string) =>
    call(base, "POST", "/v1/projects", { token, body: { name: `p ${randomUUID().slice(0, 8)}`, repo_url } });
  /** A CR on `topic`: what fetches the project's remote first. */
  const openCr = (base: string, token: string, projectId: string) =>
    call(base, "POST", `/v1/projects/${projectId}/change-requests`, { token, body: { title: "T", head_ref: "topic" } });
  /** The Authorization headers the git host received while `fn` ran. */
  async function headersDuring(fn: () => Promise<unknown>) {
    const before = host.seen.length;
    await fn();
    const during = host.seen.slice(before);
    expect(during.length).toBeGreaterThan(0);
    return new Set(during.map((r) => r.authorization));
  }
  /** Another API on the same database and repositories, with its own settings. */
  async function replica(options: Parameters<typeof startApi>[1]) {
    const other = await startApi(db.sql, { dataDir: api.dataDir, ...options });
    extra.push(other);
    return other;
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql, { repoAllowedHosts: [] });
    user = await seedUser(api.services);
    root = mkdtempSync(join(tmpdir(), "svc-origin-"));
    host = await recordingGitHost(root);
    for (const name of ["up.git", "other.git"])
      await git(["init", "--bare", "-q", "--initial-branch=main", join(root, name)]);
    dev = await workRepo(join(root, "up.git"));
    await dev.commit("initial", { "README.md": "up\n" });
    await dev.checkout("topic", { create: true });
    await dev.commit("topic", { "topic.txt": "t\n" });
    await dev.pushed("main", "topic");
    const other = await workRepo(join(root, "other.git"));
    await other.commit("initial", { "README.md": "other\n" });
    await other.pushed("main", "main:topic");
  });
  afterAll(async () => {
    for (const server of extra) await server.close();
    await api?.close();
    await host?.close();
    await db?.drop();
  });

  it("refuses loopback, private, link-local and metadata hosts with 400 at once, creating nothing, connecting nowhere", async () => {
    const accepted: Socket[] = [];
    const tarpit = createNetServer((socket) => accepted.push(socket));
    const port = await listen(tarpit);
    try {
      const before = await projectIds();
      const started = Date.now();
      for (const [repo_url, kind] of [
        [`http://127.0.0.1:${port}/x.git`, "is a loopback address"],
        [`http://localhost:${port}/x.git`, "resolves to a loopback address"],
        [`http://2130706433:${port}/x.git`, "a loopback address"],
        [`http://[::ffff:127.0.0.1]:${port}/x.git`, "a loopback address"],
        ["http://[::1]:1/x.git", "a loopback address"],
        ["ssh://git@127.0.0.1/x.git", "a loopback address"],
        [`ssh://git@localhost:${port}/x.git`, "a loopback address"],
        ["git@127.0.0.1:x.git", "a loopback address"],
        [`git://127.0.0.1:${port}/x.git`, "a loopback address"],
        [`http://0.0.0.0:${port}/x.git`, "an unspecified address"],
        ["http://10.1.2.3/x.git", "a private address"],
        ["https://172.16.5.4/x.git", "a private address"],
        ["https://192.168.1.1/x.git", "a private address"],
        ["http://[fd12::1]/x.git", "a private address"],
        ["http://169.254.169.254/x.git", "a cloud metadata address"],
        ["http://[fd00:ec2::254]/x.git", "a cloud metadata address"],
        ["http://169.254.10.10/x.git", "a link-local address"],
        ["http://[fe80::1]/x.git", "a link-local address"],
        ["https://100.64.0.1/x.git", "a carrier-grade NAT address"],
        ["https://git.invalid/x.git", "git.invalid cannot be resolved"],
      ]) {
        const res = await create(api.url, user.token, repo_url!);
        expect(res.status, repo_url).toBe(400);
        expect(res.body, repo_url).toMatchObject({ code: "REPO_URL_FORBIDDEN", field: "repo_url" });
        expect(res.body.error, repo_url).toContain(kind);
      }
      // Nothing waited on a port: every refusal came from the address alone.
      expect(Date.now() - started).toBeLessThan(5000);
      expect(accepted).toHaveLength(0);
      expect(await projectIds()).toEqual(before);
      expect(existsSync(join(api.dataDir, "mirrors"))).toBe(false);
    } finally {
      tarpit.close();
      for (const socket of accepted) socket.destroy();
    }
  });

  it("names the host and the setting that would allow it, for that port only", async () => {
    const res = await create(api.url, user.token, `${host.url}/up.git`);
    expect(res.body.error).toBe(
      `repo_url refused: the host 127.0.0.1 is a loopback address, where repositories are refused unless the stack ` +
        `allows it: svc self-host env set SVC_REPO_ALLOWED_HOSTS=127.0.0.1:${host.port} (comma-separated, with the ` +
        "hosts it already lists), then svc self-host restart",
    );
    const named = await create(api.url, user.token, "http://localhost/x.git");
    expect(named.body.error).toContain("the host localhost resolves to a loopback address");
    expect(named.body.error).toContain("SVC_REPO_ALLOWED_HOSTS=localhost:80 ");
    const { env } = cliHome();
    const cli = await svc(["projects", "create", "Inside", "--repo", "git@10.0.0.7:x.git"], {
      env: { ...env, SVC_CLI_TOKEN: user.token, SVC_API_URL: `${api.url}/v1` },
    });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain("the host 10.0.0.7 is a private address");
    expect(cli.stderr).toContain("REPO_URL_FORBIDDEN, HTTP 400");
  });

  it("serves a loopback repository its host:port is allowed for; refused again, reads serve stored data and git connects nowhere", async () => {
    const allowed = await replica({ repoAllowedHosts: [`127.0.0.1:${host.port}`] });
    // The allowance is for that port: another port of the same host stays refused.
    expect((await create(allowed.url, user.token, "http://127.0.0.1:9/x.git")).body.code).toBe("REPO_URL_FORBIDDEN");
    const project = await create(allowed.url, user.token, `${host.url}/up.git`);
    expect(project.status).toBe(201);
    const crs = `/v1/projects/${project.body.id}/change-requests`;
    const cr = await call(allowed.url, "POST", crs, { token: user.token, body: { title: "Topic", head_ref: "topic" } });
    expect(cr.status).toBe(201);
    const head = await dev.sha("topic");
    expect(cr.body.head_commit_sha).toBe(head);
    expect((await call(allowed.url, "GET", `${crs}/${cr.body.cr_id}/diff`, { token: user.token })).status).toBe(200);

    // The origin moves; the API that no longer allows the host neither sees it nor connects to ask.
    const moved = await dev.commit("more", { "more.txt": "m\n" });
    await dev.pushed("topic");
    const requests = host.seen.length;
    const read = await call(api.url, "GET", `${crs}/${cr.body.cr_id}`, { token: user.token });
    expect(read.status).toBe(200);
    expect(read.body.change_request.head_commit_sha).toBe(head);
    const diff = await call(api.url, "GET", `${crs}/${cr.body.cr_id}/diff`, { token: user.token });
    expect(diff.status).toBe(502);
    expect(diff.body.code).toBe("REPO_UNAVAILABLE");
    const merge = await call(api.url, "POST", `${crs}/${cr.body.cr_id}/merge`, { token: user.token });
    expect(merge.status).toBe(502);
    expect(host.seen.length).toBe(requests);
    // The API that allows it still follows the origin.
    expect((await allowed.services.repos.tips(project.body, 0))?.get("topic")).toBe(moved);
  });

  it("connects an http remote named by DNS to the address it checked, never resolving it again", async () => {
    // git.example.test resolves nowhere: git reaches the host only through the address the check pinned.
    const repos = createRepositories({
      dataDir: mkdtempSync(join(tmpdir(), "svc-data-")),
      checkRemote: async (url) => ({ ok: true, remote: remoteHostOf(url)!, addresses: ["127.0.0.1"] }),
    });
    const project = {
      id: randomUUID(),
      account_id: user.accountId,
      repo_kind: "external",
      repo_url: `http://git.example.test:${host.port}/up.git`,
    } as const;
    expect((await repos.tips(project, 0))?.get("main")).toBe(await dev.sha("main"));
  });

  it("sends the stack's credential only for the accounts it names", async () => {
    const token = `ghs_stack_${randomUUID()}`;
    const other = await seedUser(api.services, "other");
    const [named] = await api.services.accounts.accounts(user.userId);
    const stack = await replica({
      repoAllowedHosts: [`127.0.0.1:${host.port}`],
      repoAccess: { token, url: `${host.url}/`, accounts: [named!.slug] },
    });
    for (const [who, sent] of [
      [user.token, basic(token)],
      [other.token, undefined],
    ] as const) {
      const p = await create(stack.url, who, `${host.url}/other.git`);
      expect(p.status).toBe(201);
      const headers = await headersDuring(async () => {
        expect((await openCr(stack.url, who, p.body.id)).body.head_commit_sha).toMatch(/^[0-9a-f]{40}$/);
      });
      expect(headers).toEqual(new Set([sent]));
    }
  });

  it("serves the admin's own accounts when no account is named", async () => {
    const token = `ghs_admin_${randomUUID()}`;
    const stack = await replica({
      repoAllowedHosts: [`127.0.0.1:${host.port}`],
      repoAccess: { token, url: `${host.url}/` },
    });
    const { userId } = await stack.services.accounts.createUserWithAccount({
      email: "root@example.test",
      name: "admin",
      accountSlug: `admin-${randomUUID().slice(0, 8)}`,
      isAdmin: true,
    });
    const admin = (await stack.services.tokens.mint({ userId, name: "test" })).token;
    const stranger = await seedUser(stack.services, "stranger");
    for (const [who, sent] of [
      [stranger.token, undefined],
      [admin, basic(token)],
    ] as const) {
      const p = await create(stack.url, who, `${host.url}/other.git`);
      expect(await headersDuring(() => openCr(stack.url, who, p.body.id))).toEqual(new Set([sent]));
    }
  });

  it("sends no credential along a redirect to another origin", async () => {
    const token = `ghs_redirect_${randomUUID()}`;
    // The repository really is at the redirect's target: git following it would go on to fetch there.
    const target = await recordingGitHost(root);
    const redirects: (string | undefined)[] = [];
    const redirector = createServer((req, res) => {
      redirects.push(req.headers.authorization);
      res.writeHead(302, { location: `http://localhost:${target.port}${req.url}` }).end();
    });
    const port = await listen(redirector);
    try {
      // Both origins allowed: only the redirect rule stands between the token and the second one.
      const stack = await replica({
        repoAllowedHosts: [`127.0.0.1:${port}`, `localhost:${target.port}`],
        repoAccess: { token, url: `http://127.0.0.1:${port}/`, accounts: [user.accountId] },
      });
      const p = await create(stack.url, user.token, `http://127.0.0.1:${port}/up.git`);
      expect(p.status).toBe(201);
      const cr = await openCr(stack.url, user.token, p.body.id);
      expect(redirects).toContain(basic(token));
      expect(target.seen.filter((r) => r.authorization !== undefined)).toEqual([]);
      // Not followed at all: the remote answers as unreachable, and the CR is stored without SHAs.
      expect(cr.body).toMatchObject({ head_commit_sha: null, base_commit_sha: null });
    } finally {
      await closeServer(redirector);
      await target.close();
    }
  });
});
