import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import type { Project } from "../protocol/project.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { type GitServer, hostedRepository } from "./support/git-server.ts";

describe("change requests on an external repository (any git URL)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let server: GitServer;
  /** The origin's bare repository on disk (the test looks at it) and its URL on the git host (the API's view). */
  let origin: string;
  let originUrl: string;
  let project: Project;
  let dev: WorkRepo;

  const originTip = async (branch: string) =>
    (await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], { dir: origin, okCodes: [1] })).stdout.trim();
  const crs = (suffix = "", method = "GET", body?: unknown) =>
    call(api.url, method, `/v1/projects/${project.id}/change-requests${suffix}`, { token: user.token, body });

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    ({ server, origin, url: originUrl, dev } = await hostedRepository("upstream repo.git", { defaultBranch: "trunk" }));
    await dev.commit("initial", { "app.txt": "v1\n" });
    await dev.pushed("trunk");
    const created = await call(api.url, "POST", "/v1/projects", {
      token: user.token,
      body: { name: "Upstream", repo_url: originUrl, default_branch: "trunk" },
    });
    expect(created.status).toBe(201);
    project = created.body;
  });
  afterAll(async () => {
    await api?.close();
    await server?.close();
    await db?.drop();
  });

  it("registers the URL as an external project without creating a managed repo", () => {
    expect(project).toMatchObject({ repo_kind: "external", repo_url: originUrl, default_branch: "trunk" });
    expect(existsSync(api.services.repos.managedDir(project.id))).toBe(false);
  });

  it("sees a branch pushed straight to the origin, then fast-forwards the origin on merge", async () => {
    await dev.checkout("feature", { create: true });
    const head = await dev.commit("feature", { "feature.txt": "f\n" });
    await dev.pushed("feature");
    const cr = (await crs("", "POST", { title: "Feature", head_ref: "feature" })).body;
    expect(cr).toMatchObject({ base_ref: "trunk", head_commit_sha: head });
    const merged = await crs(`/${cr.cr_id}/merge`, "POST");
    expect(merged.status).toBe(200);
    expect(merged.body.merge_commit_sha).toBe(head);
    expect(await originTip("trunk")).toBe(head);
  });

  it("pushes a three-way merge commit to the origin", async () => {
    await dev.git(["fetch", "-q", "origin"]);
    await dev.checkout("side", { create: true, from: "origin/trunk" });
    const side = await dev.commit("side", { "side.txt": "s\n" });
    await dev.pushed("side");
    await dev.checkout("trunk");
    await dev.git(["reset", "-q", "--hard", "origin/trunk"]);
    const moved = await dev.commit("trunk moves", { "trunk.txt": "t\n" });
    await dev.pushed("trunk");

    const cr = (await crs("", "POST", { title: "Side", head_ref: "side" })).body;
    expect(cr.base_commit_sha).toBe(moved);
    const merged = (await crs(`/${cr.cr_id}/merge`, "POST")).body;
    expect(merged.status).toBe("merged");
    expect(await originTip("trunk")).toBe(merged.merge_commit_sha);
    const { stdout } = await git(["log", "-1", "--format=%P", merged.merge_commit_sha], { dir: origin });
    expect(stdout.trim()).toBe(`${moved} ${side}`);
  });

  it("never overwrites a base that moved on the origin behind the mirror's back", async () => {
    const repos = api.services.repos;
    const dir = await repos.open(project, 0);
    const staleBase = (await git(["rev-parse", "refs/heads/trunk"], { dir })).stdout.trim();
    const tree = (await git(["rev-parse", `${staleBase}^{tree}`], { dir })).stdout.trim();
    const ours = (
      await git(["commit-tree", tree, "-p", staleBase, "-m", "ours"], {
        dir,
        env: { GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@t", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@t" },
      })
    ).stdout.trim();

    await dev.git(["fetch", "-q", "origin"]);
    await dev.checkout("trunk");
    await dev.git(["reset", "-q", "--hard", "origin/trunk"]);
    const theirs = await dev.commit("someone else lands first", { "race.txt": "r\n" });
    await dev.pushed("trunk");

    expect(await repos.updateBranch(project, "trunk", ours, staleBase)).toBe(false);
    expect(await originTip("trunk")).toBe(theirs);
  });

  it("creates session branches on a generic backend by pushing the base tip", async () => {
    const dir = await api.services.repos.open(project, 0);
    const base = (await git(["rev-parse", "refs/heads/trunk"], { dir })).stdout.trim();
    expect(await api.services.repos.createBranch(project, "0b6f3a52-session", base)).toBe(true);
    expect(await originTip("0b6f3a52-session")).toBe(base);
    // Never moves an existing branch: creating it again at another commit is refused.
    const older = (await git(["rev-parse", `${base}~1`], { dir })).stdout.trim();
    expect(await api.services.repos.createBranch(project, "0b6f3a52-session", older)).toBe(false);
    expect(await originTip("0b6f3a52-session")).toBe(base);
  });

  it("serves stored data when the origin is unreachable and reports it on diff", async () => {
    const gone = await call(api.url, "POST", "/v1/projects", {
      token: user.token,
      body: { name: "Gone", repo_url: `${server.url}/svc-no-such-repo.git` },
    });
    const path = `/v1/projects/${gone.body.id}/change-requests`;
    const cr = await call(api.url, "POST", path, { token: user.token, body: { title: "Offline", head_ref: "x" } });
    expect(cr.status).toBe(201);
    expect(cr.body).toMatchObject({ head_commit_sha: null, base_commit_sha: null });
    const read = await call(api.url, "GET", `${path}/${cr.body.cr_id}`, { token: user.token });
    expect(read.status).toBe(200);
    expect((await call(api.url, "GET", `${path}/${cr.body.cr_id}/diff`, { token: user.token })).status).toBe(502);
  });

  it("authenticates to a private remote with the project's GIT_ACCESS_TOKEN secret", async () => {
    // A private HTTP remote: another project's managed repository on this very server.
    const upstream = (
      await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Private upstream" } })
    ).body;
    const pusher = await workRepo(authedUrl(upstream.repo_url, user.token));
    await pusher.commit("private", { "secret.txt": "s\n" });
    await pusher.checkout("topic", { create: true });
    await pusher.commit("topic", { "topic.txt": "t\n" });
    await pusher.pushed("main", "topic");

    const mirror = (
      await call(api.url, "POST", "/v1/projects", {
        token: user.token,
        body: { name: "Mirror of private", repo_url: upstream.repo_url },
      })
    ).body;
    const crs = `/v1/projects/${mirror.id}/change-requests`;
    const without = await call(api.url, "POST", crs, {
      token: user.token,
      body: { title: "no creds", head_ref: "topic" },
    });
    expect(without.body.head_commit_sha).toBeNull();

    await call(api.url, "PUT", `/v1/projects/${mirror.id}/secrets`, {
      token: user.token,
      body: { secrets: { GIT_ACCESS_TOKEN: user.token } },
    });
    const withToken = await call(api.url, "POST", crs, {
      token: user.token,
      body: { title: "with creds", head_ref: "topic" },
    });
    expect(withToken.status).toBe(201);
    expect(withToken.body.head_commit_sha).toBe(await pusher.sha("topic"));
    const diff = await call(api.url, "GET", `${crs}/${withToken.body.cr_id}/diff`, { token: user.token });
    expect(diff.body.files.map((f: { path: string }) => f.path)).toEqual(["topic.txt"]);
    const mirrorConfig = readFileSync(join(api.dataDir, "mirrors", `${mirror.id}.git`, "config"), "utf8");
    expect(mirrorConfig).not.toContain(user.token);
  });

  it("never shows credentials embedded in a repository URL", async () => {
    const created = await call(api.url, "POST", "/v1/projects", {
      token: user.token,
      body: { name: "Private", repo_url: "https://bot:ghp_SECRET123@git.example.test/org/repo.git" },
    });
    expect(created.status).toBe(201);
    const shown = [
      created.body,
      (await call(api.url, "GET", `/v1/projects/${created.body.id}`, { token: user.token })).body,
    ];
    shown.push(...(await call(api.url, "GET", "/v1/projects", { token: user.token })).body.projects);
    expect(JSON.stringify(shown)).not.toContain("ghp_SECRET123");
    expect(created.body.repo_url).toBe("https://bot:***@git.example.test/org/repo.git");
  });

  it("refuses repository URLs that would run commands or inject options", async () => {
    const marker = join(mkdtempSync(join(tmpdir(), "svc-pwn-")), "pwned");
    for (const repo_url of [
      `ext::sh -c touch% ${marker}`,
      "--upload-pack=touch /tmp/x",
      "relative/path",
      "ftp://host/repo",
    ]) {
      const res = await call(api.url, "POST", "/v1/projects", {
        token: user.token,
        body: { name: `bad ${repo_url}`, repo_url },
      });
      expect(res.status, repo_url).toBe(400);
      expect(res.body.field).toBe("repo_url");
    }
    expect(existsSync(marker)).toBe(false);
  });
});
