import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { cliHome, svc } from "../support/cli.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, workRepo } from "../support/git-fixture.ts";

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
    expect((await work.push("main", "topic")).code).toBe(0);
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
    for (const repo_url of [
      "https://github.com/org/repo.git",
      "https://bot:secret@git.example.test/org/repo.git",
      "http://127.0.0.1:9/repo.git",
      "ssh://git@git.example.test:2222/org/repo.git",
      "ssh://[::1]/srv/repo.git",
      "git://git.example.test/repo.git",
      "git@github.com:org/repo.git",
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
