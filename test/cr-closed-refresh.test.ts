import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { cliHome, svc } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";

describe("SPEC CR rule 5: an open or closed CR reflects new commits pushed to the head branch afterwards", () => {
  describe.each(databaseKinds("postgres"))("%s", (kind) => {
    let db: TestDatabase;
    let api: TestApi;
    let user: Awaited<ReturnType<typeof seedUser>>;
    let projectId: string;
    let bareDir: string;
    let work: WorkRepo;
    let counter = 0;

    const req = (method: string, suffix = "", body?: unknown) =>
      call(api.url, method, `/v1/projects/${projectId}/change-requests${suffix}`, { token: user.token, body });
    const tip = async (branch: string) =>
      (await git(["rev-parse", `refs/heads/${branch}`], { dir: bareDir })).stdout.trim();
    const cli = (args: string[]) =>
      svc([...args, "--project", projectId], {
        env: { ...cliHome().env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: user.token },
      });
    /** `svc cr show <n> --json`: the CR as the real CLI prints it. */
    async function shown(number: number) {
      const out = await cli(["cr", "show", String(number), "--json"]);
      expect(out.code, out.stderr).toBe(0);
      return JSON.parse(out.stdout).change_request;
    }
    const listed = async (status: string, crId: string) =>
      (await req("GET", `?status=${status}`)).body.change_requests.find((c: { cr_id: string }) => c.cr_id === crId);

    /** A branch off main with one commit, pushed, and a CR opened from it. */
    async function openCr() {
      counter += 1;
      const head = `topic-${counter}`;
      await work.git(["fetch", "-q", "origin"]);
      await work.checkout(head, { create: true, from: "origin/main" });
      await work.commit(`work on ${head}`, { [`${head}.txt`]: "1\n" });
      await work.pushed(head);
      const opened = await req("POST", "", { title: `CR ${head}`, head_ref: head });
      expect(opened.status, JSON.stringify(opened.body)).toBe(201);
      return { head, cr: opened.body };
    }

    /** A new commit on the checked-out head branch, pushed through the API's git endpoint; returns its SHA. */
    async function pushMore(head: string, file: string) {
      const sha = await work.commit(`more on ${head}`, { [file]: "more\n" });
      await work.pushed(head);
      return sha;
    }

    beforeAll(async () => {
      db = await freshDatabase(kind);
      api = await startApi(db.sql);
      user = await seedUser(api.services);
      const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Rule 5" } });
      projectId = created.body.id;
      bareDir = api.services.repos.managedDir(projectId);
      work = await workRepo(authedUrl(created.body.repo_url, user.token));
      await work.commit("initial", { "README.md": "hello\n" });
      await work.pushed("main");
    });
    afterAll(async () => {
      await api?.close();
      await db?.drop();
    });

    it("a closed CR shows the head pushed after it was closed: GET, list and `svc cr show`; reopen still works", async () => {
      const { head, cr } = await openCr();
      const closed = await req("POST", `/${cr.cr_id}/close`);
      expect(closed.body).toMatchObject({ status: "closed", head_commit_sha: cr.head_commit_sha });

      const pushed = await pushMore(head, "after-close.txt");
      expect(pushed).not.toBe(cr.head_commit_sha);
      const got = (await req("GET", `/${cr.cr_id}`)).body.change_request;
      expect(got).toMatchObject({ status: "closed", head_commit_sha: pushed, closed_at: closed.body.closed_at });
      expect(new Date(got.updated_at).getTime()).toBeGreaterThan(new Date(closed.body.updated_at).getTime());
      expect((await shown(cr.number)).head_commit_sha).toBe(pushed);

      // Again, seen first by the list and the CLI.
      const again = await pushMore(head, "later-still.txt");
      expect((await listed("closed", cr.cr_id)).head_commit_sha).toBe(again);
      expect((await listed("all", cr.cr_id)).head_commit_sha).toBe(again);
      const third = await pushMore(head, "third.txt");
      expect(await shown(cr.number)).toMatchObject({ status: "closed", head_commit_sha: third });

      const reopened = await req("POST", `/${cr.cr_id}/reopen`);
      expect(reopened.status).toBe(200);
      expect(reopened.body).toMatchObject({ status: "open", head_commit_sha: third, closed_at: null });
      expect((await shown(cr.number)).status).toBe("open");
    });

    it("a closed CR keeps the base it was closed with while main moves; reopening follows main again", async () => {
      const { head, cr } = await openCr();
      await req("POST", `/${cr.cr_id}/close`);
      // main moves as another CR's merge would move it (the API's git endpoint refuses pushes to main).
      await work.git(["fetch", "-q", "origin"]);
      await work.checkout("main");
      await work.git(["reset", "-q", "--hard", "origin/main"]);
      await work.commit("main moves", { "main-moves.txt": "x\n" });
      await work.git(["push", "-q", bareDir, "main"]);
      const main = await tip("main");
      expect(main).not.toBe(cr.base_commit_sha);

      await work.checkout(head);
      const pushed = await pushMore(head, "while-main-moved.txt");
      const got = (await req("GET", `/${cr.cr_id}`)).body.change_request;
      expect(got).toMatchObject({ head_commit_sha: pushed, base_commit_sha: cr.base_commit_sha });

      const reopened = (await req("POST", `/${cr.cr_id}/reopen`)).body;
      expect(reopened).toMatchObject({ status: "open", head_commit_sha: pushed, base_commit_sha: main });
    });

    it("a merged CR keeps its merged head when its branch gets new commits", async () => {
      const { head, cr } = await openCr();
      const merged = await req("POST", `/${cr.cr_id}/merge`, { head_sha: cr.head_commit_sha });
      expect(merged.status, JSON.stringify(merged.body)).toBe(200);
      expect(merged.body).toMatchObject({ status: "merged", head_commit_sha: cr.head_commit_sha });

      const pushed = await pushMore(head, "after-merge.txt");
      expect(await tip(head)).toBe(pushed);
      const got = (await req("GET", `/${cr.cr_id}`)).body.change_request;
      expect(got).toMatchObject({
        status: "merged",
        head_commit_sha: cr.head_commit_sha,
        base_commit_sha: merged.body.base_commit_sha,
        updated_at: merged.body.updated_at,
      });
      expect((await listed("merged", cr.cr_id)).head_commit_sha).toBe(cr.head_commit_sha);
      expect((await shown(cr.number)).head_commit_sha).toBe(cr.head_commit_sha);
      expect((await req("GET", `/${cr.cr_id}/diff`)).body.head_sha).toBe(cr.head_commit_sha);
    });
  });
});
