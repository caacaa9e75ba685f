import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";

describe.each(databaseKinds("postgres"))("change requests on a managed repository (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  let bareDir: string;
  let work: WorkRepo;
  let counter = 0;

  const crPath = (suffix = "") => `/v1/projects/${projectId}/change-requests${suffix}`;
  const req = (method: string, suffix: string, body?: unknown) =>
    call(api.url, method, crPath(suffix), { token: user.token, body });
  const open = (head: string, extra: Record<string, unknown> = {}) =>
    req("POST", "", { title: `CR ${head}`, head_ref: head, ...extra });
  const tip = async (branch: string) =>
    (await git(["rev-parse", `refs/heads/${branch}`], { dir: bareDir })).stdout.trim();

  /** A fresh branch off main's current tip with one commit of the given files, pushed. */
  async function branch(files: Record<string, string | Buffer | null>, from = "main") {
    counter += 1;
    const name = `topic-${counter}`;
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(name, { create: true, from: `origin/${from}` });
    await work.commit(`work on ${name}`, files);
    await work.pushed(name);
    return name;
  }

  /**
   * Moves main ahead as another CR's merge would, written straight into the bare repository (the API's git
   * endpoint refuses any push to main).
   */
  async function advanceMain(files: Record<string, string | null>) {
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout("main");
    await work.git(["reset", "-q", "--hard", "origin/main"]);
    await work.commit("main moves", files);
    await work.git(["push", "-q", bareDir, "main"]);
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "CR playground" } });
    projectId = created.body.id;
    bareDir = api.services.repos.managedDir(projectId);
    work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n", "conflict.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n" });
    await work.pushed("main");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("fast-forwards when head is strictly ahead: merge_commit_sha = head tip", async () => {
    const head = await branch({ "feature.txt": "new\n" });
    const created = await open(head, { description: "adds a feature" });
    expect(created.status).toBe(201);
    const cr = created.body;
    expect(cr).toMatchObject({ status: "open", base_ref: "main", head_ref: head, description: "adds a feature" });
    expect(cr.head_commit_sha).toBe(await tip(head));
    expect(cr.base_commit_sha).toBe(await tip("main"));

    const preview = await req("GET", `/${cr.cr_id}/merge-preview`);
    expect(preview.body).toMatchObject({
      can_merge: true,
      can_fast_forward: true,
      is_up_to_date: false,
      conflicts: [],
    });
    expect(preview.body.merge_base).toBe(cr.base_commit_sha);

    const baseBefore = await tip("main");
    const merged = await req("POST", `/${cr.cr_id}/merge`);
    expect(merged.status).toBe(200);
    expect(merged.body).toMatchObject({ status: "merged", merged_by: user.userId });
    expect(merged.body.merge_commit_sha).toBe(await tip(head));
    expect(merged.body.head_commit_sha).toBe(merged.body.merge_commit_sha);
    expect(merged.body.base_commit_sha).toBe(baseBefore);
    expect(await tip("main")).toBe(merged.body.merge_commit_sha);
    expect(merged.body.merged_at).not.toBeNull();
  });

  it("keeps metadata a JSON object on both databases", async () => {
    const created = await open(await branch({ "meta.txt": "m\n" }), { metadata: { source: "agent", n: 1 } });
    expect(created.status).toBe(201);
    expect(created.body.metadata).toEqual({ source: "agent", n: 1 });
    expect((await req("GET", `/${created.body.cr_id}`)).body.change_request.metadata).toEqual({
      source: "agent",
      n: 1,
    });
    expect((await open(await branch({ "meta2.txt": "m\n" }))).body.metadata).toEqual({});
  });

  it("writes a three-way merge commit by the system identity with the default message", async () => {
    const head = await branch({ "three-way.txt": "side\n" });
    await advanceMain({ "main-only.txt": "main\n" });
    const cr = (await open(head)).body;
    const preview = (await req("GET", `/${cr.number}/merge-preview`)).body;
    expect(preview).toMatchObject({ can_merge: true, can_fast_forward: false, is_up_to_date: false });

    const baseBefore = await tip("main");
    const headTip = await tip(head);
    const merged = (await req("POST", `/${cr.cr_id}/merge`)).body;
    expect(merged.status).toBe("merged");
    expect(merged.head_commit_sha).toBe(headTip);
    expect(merged.base_commit_sha).toBe(baseBefore);
    expect(await tip("main")).toBe(merged.merge_commit_sha);
    const { stdout } = await git(["log", "-1", "--format=%P%n%an <%ae>%n%s", merged.merge_commit_sha], {
      dir: bareDir,
    });
    const [parents, author, subject] = stdout.trim().split("\n");
    expect(parents).toBe(`${baseBefore} ${headTip}`);
    expect(author).toBe("svc <noreply@svc.local>");
    expect(subject).toBe(`Merge CR #${cr.number}: ${cr.title}`);

    // The merged CR's diff is rendered from the captured SHAs: only the head's change.
    const diff = (await req("GET", `/${cr.cr_id}/diff`)).body;
    expect(diff.files.map((f: { path: string }) => f.path)).toEqual(["three-way.txt"]);
  });

  it("uses the given merge message", async () => {
    const head = await branch({ "msg.txt": "x\n" });
    await advanceMain({ "msg-main.txt": "y\n" });
    const cr = (await open(head)).body;
    const merged = (await req("POST", `/${cr.cr_id}/merge`, { message: "Ship it" })).body;
    const { stdout } = await git(["log", "-1", "--format=%B", merged.merge_commit_sha], { dir: bareDir });
    expect(stdout.trim()).toBe("Ship it");
  });

  it.each([
    [
      "content",
      { "conflict.txt": "one\nHEAD SIDE\nthree\n" },
      { "conflict.txt": "one\nBASE SIDE\nthree\n" },
      "conflict.txt",
    ],
    ["modify/delete", { "gone.txt": "changed on head\n" }, { "gone.txt": null }, "gone.txt"],
    ["add/add", { "both added.txt": "head version\n" }, { "both added.txt": "base version\n" }, "both added.txt"],
  ])(
    "reports a %s conflict, refuses the merge with 409 and moves nothing",
    async (_kind, headFiles, baseFiles, path) => {
      const head = await branch(headFiles);
      await advanceMain(baseFiles);
      const cr = (await open(head)).body;
      const preview = (await req("GET", `/${cr.cr_id}/merge-preview`)).body;
      expect(preview).toMatchObject({ can_merge: false, can_fast_forward: false, conflicts: [path] });

      const baseBefore = await tip("main");
      const merge = await req("POST", `/${cr.cr_id}/merge`);
      expect(merge.status).toBe(409);
      expect(merge.body.error).toBe("Merge failed");
      expect(await tip("main")).toBe(baseBefore);
      expect((await req("GET", `/${cr.cr_id}`)).body.change_request.status).toBe("open");
      await req("POST", `/${cr.cr_id}/close`);
    },
  );

  it("treats a head already contained in base as up to date", async () => {
    await work.git(["fetch", "-q", "origin"]);
    const behind = `behind-${++counter}`;
    await work.git(["push", "-q", "origin", `origin/main~1:refs/heads/${behind}`]);
    const cr = (await open(behind)).body;
    const preview = (await req("GET", `/${cr.cr_id}/merge-preview`)).body;
    expect(preview).toMatchObject({ is_up_to_date: true, can_fast_forward: false, can_merge: true, conflicts: [] });
    const diff = (await req("GET", `/${cr.cr_id}/diff`)).body;
    expect(diff.files).toEqual([]);
    expect(diff.patch).toBe("");
    const baseBefore = await tip("main");
    const merged = (await req("POST", `/${cr.cr_id}/merge`)).body;
    expect(merged.status).toBe("merged");
    expect(await tip("main")).toBe(baseBefore);
  });

  it("reports unrelated histories with a null merge base and refuses to merge them", async () => {
    await work.checkout(`orphan-${++counter}`, { orphan: true });
    await work.git(["rm", "-rq", "--cached", "."]);
    const name = `orphan-${counter}`;
    await work.commit("unrelated", { "other.txt": "x\n" });
    await work.pushed(name);
    const cr = (await open(name)).body;
    const preview = (await req("GET", `/${cr.cr_id}/merge-preview`)).body;
    expect(preview).toMatchObject({
      merge_base: null,
      can_merge: false,
      can_fast_forward: false,
      is_up_to_date: false,
    });
    const merge = await req("POST", `/${cr.cr_id}/merge`);
    expect(merge.status).toBe(409);
    expect(merge.body.error).toBe("Merge failed");
    expect((await req("GET", `/${cr.cr_id}/diff`)).status).toBe(200);
  });

  it("lists files with status, counts, renames, binaries and unusual paths", async () => {
    const binary = Buffer.from([0, 1, 2, 3, 255, 0, 7]);
    await work.git(["fetch", "-q", "origin"]);
    const name = `files-${++counter}`;
    await work.checkout(name, { create: true, from: "origin/main" });
    work.write({ "docs/README renamed.md": "hello\n", "README.md": null });
    await work.commit("many kinds of change", {
      "space dir/ünïcödé file.txt": "a\nb\n",
      "blob.bin": binary,
      "feature.txt": null,
      "msg.txt": "x\nmore\n",
    });
    await work.pushed(name);
    const cr = (await open(name)).body;
    const diff = (await req("GET", `/${cr.cr_id}/diff`)).body;
    const byPath = Object.fromEntries(diff.files.map((f: { path: string }) => [f.path, f]));
    expect(byPath["space dir/ünïcödé file.txt"]).toMatchObject({
      status: "added",
      additions: 2,
      deletions: 0,
      binary: false,
    });
    expect(byPath["blob.bin"]).toMatchObject({ status: "added", binary: true, additions: 0, deletions: 0 });
    expect(byPath["feature.txt"]).toMatchObject({ status: "deleted", deletions: 1 });
    expect(byPath["msg.txt"]).toMatchObject({ status: "modified", additions: 1, deletions: 0 });
    expect(byPath["docs/README renamed.md"]).toMatchObject({ status: "modified", old_path: "README.md" });
    expect(diff.patch).toContain("+more");
    expect(diff.patch).toContain("Binary files");
    expect(diff.head_sha).toBe(await tip(name));
  });

  it("refreshes open CRs from live branches and skips the refresh when the head branch is gone", async () => {
    const head = await branch({ "live.txt": "1\n" });
    const cr = (await open(head)).body;
    await work.commit("second", { "live.txt": "2\n" });
    await work.push(head);
    const refreshed = (await req("GET", `/${cr.cr_id}`)).body.change_request;
    expect(refreshed.head_commit_sha).toBe(await tip(head));
    expect(refreshed.head_commit_sha).not.toBe(cr.head_commit_sha);
    expect(new Date(refreshed.updated_at).getTime()).toBeGreaterThan(new Date(cr.updated_at).getTime());

    await work.git(["push", "-q", "origin", `:${head}`]);
    const afterDelete = await req("GET", `/${cr.cr_id}`);
    expect(afterDelete.status).toBe(200);
    expect(afterDelete.body.change_request.head_commit_sha).toBe(refreshed.head_commit_sha);
    const listed = (await req("GET", "?status=open")).body.change_requests;
    expect(listed.find((c: { cr_id: string }) => c.cr_id === cr.cr_id).head_commit_sha).toBe(refreshed.head_commit_sha);
  });

  it("follows new commits on a closed CR's branch in its diff (no freeze)", async () => {
    const head = await branch({ "closed.txt": "1\n" });
    const cr = (await open(head)).body;
    expect((await req("POST", `/${cr.cr_id}/close`)).body.status).toBe("closed");
    await work.commit("after close", { "closed-later.txt": "2\n" });
    await work.push(head);
    const diff = (await req("GET", `/${cr.cr_id}/diff`)).body;
    expect(diff.files.map((f: { path: string }) => f.path).sort()).toEqual(["closed-later.txt", "closed.txt"]);
  });

  it("enforces the state machine with SPEC's 409s", async () => {
    const head = await branch({ "state.txt": "s\n" });
    const cr = (await open(head)).body;

    // As a client that labels every POST as JSON sends a bodiless action: an empty body is no body.
    const asJson = { token: user.token, rawBody: "", headers: { "content-type": "application/json" } };
    const closed = await call(api.url, "POST", crPath(`/${cr.cr_id}/close`), asJson);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: "closed", closed_by: user.userId });
    expect(closed.body.closed_at).not.toBeNull();
    expect((await req("POST", `/${cr.cr_id}/merge`)).status).toBe(409);

    const reopened = await call(api.url, "POST", crPath(`/${cr.cr_id}/reopen`), asJson);
    expect(reopened.body).toMatchObject({ status: "open", closed_at: null, closed_by: null });
    expect((await req("POST", `/${cr.cr_id}/reopen`)).status).toBe(409);

    expect((await req("POST", `/${cr.cr_id}/merge`)).status).toBe(200);
    for (const action of ["merge", "close", "reopen"]) {
      const res = await req("POST", `/${cr.cr_id}/${action}`);
      expect(res.status, action).toBe(409);
    }
    expect((await req("GET", `/${cr.cr_id}`)).body.change_request.status).toBe("merged");
  });

  it("validates creation: 400 for head = base, missing title or head, unknown branch; drops unknown sessions", async () => {
    const head = await branch({ "valid.txt": "v\n" });
    const cases: [unknown, number, string?][] = [
      [{ title: "same", head_ref: "main" }, 400, "head_ref"],
      [{ title: "same", head_ref: head, base_ref: head }, 400, "head_ref"],
      [{ head_ref: head }, 400, "title"],
      [{ title: "", head_ref: head }, 400, "title"],
      [{ title: "   ", head_ref: head }, 400, "title"],
      [{ title: "no head" }, 400, "head_ref"],
      [{ title: "bad ref", head_ref: "a..b" }, 400, "head_ref"],
      [{ title: "missing", head_ref: "no-such-branch" }, 400, "head_ref"],
      [{ title: "x", head_ref: head, extra: 1 }, 400, "extra"],
      [{ title: "head", head_ref: "HEAD" }, 400, "head_ref"],
    ];
    // A branch that looks like the default one is refused even where it exists (written past the git endpoint,
    // which refuses such names on push).
    await git(["update-ref", "refs/heads/Main", await tip(head)], { dir: bareDir });
    for (const body of [
      { title: "lookalike head", head_ref: "Main" },
      { title: "lookalike base", head_ref: head, base_ref: "Main" },
    ]) {
      const res = await req("POST", "", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatch(/'Main' differs from the default branch 'main' only in case/);
      expect(res.body.field).toBe(body.base_ref ? "base_ref" : "head_ref");
    }
    const before = (await req("GET", "?status=all")).body.change_requests.length;
    for (const [body, status, field] of cases) {
      const res = await req("POST", "", body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      if (field) expect(res.body.field, JSON.stringify(body)).toBe(field);
    }
    expect((await req("GET", "?status=all")).body.change_requests).toHaveLength(before);

    const dropped = await open(head, { session_id: "00000000-0000-4000-8000-000000000000" });
    expect(dropped.status).toBe(201);
    expect(dropped.body.origin_session_id).toBeNull();
    expect(dropped.body.created_by).toBe(user.userId);
  });

  it("merges exactly the head the person saw: a head moved since is 409 HEAD_MOVED and nothing merges", async () => {
    const head = await branch({ "reviewed.txt": "seen\n" });
    const cr = (await open(head)).body;
    const seen = cr.head_commit_sha;
    await work.commit("pushed after the review", { "unseen.txt": "unseen\n" });
    await work.pushed(head);
    const mainBefore = await tip("main");

    expect((await req("POST", `/${cr.cr_id}/merge`, { head_sha: "abc123" })).status).toBe(400);
    const refused = await req("POST", `/${cr.cr_id}/merge`, { head_sha: seen });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: "HEAD_MOVED", head_sha: await tip(head) });
    expect(refused.body.error).toContain(`moved to ${(await tip(head)).slice(0, 12)}`);
    expect(await tip("main")).toBe(mainBefore);
    expect((await req("GET", `/${cr.cr_id}`)).body.change_request.status).toBe("open");

    const merged = await req("POST", `/${cr.cr_id}/merge`, { head_sha: await tip(head) });
    expect(merged.status).toBe(200);
    expect(merged.body).toMatchObject({ status: "merged", head_commit_sha: await tip(head) });
    expect(await tip("main")).toBe(await tip(head));
  });

  it("edits title and description with PATCH and looks CRs up by number, #number or id", async () => {
    const head = await branch({ "patch.txt": "p\n" });
    const cr = (await open(head)).body;
    const edited = await req("PATCH", `/${cr.cr_id}`, { title: "Renamed", description: "Body" });
    expect(edited.body).toMatchObject({ title: "Renamed", description: "Body", number: cr.number });
    expect((await req("PATCH", `/${cr.cr_id}`, { title: "" })).status).toBe(400);
    expect((await req("PATCH", `/${cr.cr_id}`, {})).status).toBe(400);
    for (const ref of [String(cr.number), `%23${cr.number}`, cr.cr_id]) {
      expect((await req("GET", `/${ref}`)).body.change_request.cr_id, ref).toBe(cr.cr_id);
    }
    expect((await req("GET", "/999999")).status).toBe(404);
    expect((await req("GET", "/not-a-ref")).status).toBe(404);
  });

  it("filters the list by status and rejects an unknown status", async () => {
    const all = (await req("GET", "")).body.change_requests;
    const statuses = new Set(all.map((c: { status: string }) => c.status));
    expect(statuses).toEqual(new Set(["open", "merged", "closed"]));
    for (const status of ["open", "merged", "closed"]) {
      const list = (await req("GET", `?status=${status}`)).body.change_requests;
      expect(list.length).toBeGreaterThan(0);
      expect(list.every((c: { status: string }) => c.status === status)).toBe(true);
    }
    expect((await req("GET", "?status=draft")).status).toBe(400);
  });

  it("numbers 50 concurrent creates 1..n without gaps or duplicates, and never reuses a number", async () => {
    const head = await branch({ "numbers.txt": "n\n" });
    const before = (await req("GET", "?status=all")).body.change_requests.length;
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => open(head, { title: `race ${i}` })));
    expect(results.every((r) => r.status === 201)).toBe(true);
    const numbers = results.map((r) => r.body.number).sort((a, b) => a - b);
    expect(new Set(numbers).size).toBe(50);
    expect(numbers[49] - numbers[0]).toBe(49);
    expect(numbers[0]).toBe(before + 1);
    await Promise.all(results.map((r) => req("POST", `/${r.body.cr_id}/close`)));
    const next = (await open(head)).body.number;
    expect(next).toBe(numbers[49] + 1);
  });

  it("merges a CR once when two API replicas race to merge it", async () => {
    const twin = await startApi(db.sql, { dataDir: api.dataDir });
    try {
      await advanceMain({ "replica-base.txt": "moved\n" });
      const head = await branch({ "replica.txt": "r\n" }, "main~1");
      const cr = (await open(head)).body;
      const before = await tip("main");
      const replies = await Promise.all(
        [api, twin].map((replica) =>
          call(replica.url, "POST", crPath(`/${cr.cr_id}/merge`), { token: user.token, body: {} }),
        ),
      );
      expect(replies.map((r) => r.status).sort()).toEqual([200, 409]);
      const winner = replies.find((r) => r.status === 200)!.body;
      expect(replies.find((r) => r.status === 409)!.body.code).toBe("CR_NOT_OPEN");
      expect((await git(["rev-parse", "main^1"], { dir: bareDir })).stdout.trim()).toBe(before);
      expect(await tip("main")).toBe(winner.merge_commit_sha);
      expect((await req("GET", `/${cr.cr_id}`)).body.change_request).toMatchObject({
        status: "merged",
        merge_commit_sha: winner.merge_commit_sha,
      });
    } finally {
      await twin.close();
    }
  });

  it("lands two concurrent merges onto one base without losing a commit", async () => {
    const a = await branch({ "race-a.txt": "a\n" });
    const b = await branch({ "race-b.txt": "b\n" });
    const crA = (await open(a)).body;
    const crB = (await open(b)).body;
    const [ra, rb] = await Promise.all([req("POST", `/${crA.cr_id}/merge`), req("POST", `/${crB.cr_id}/merge`)]);
    // Merges of one project are serialized and the base ref moves by compare-and-swap: both land.
    expect([ra.status, rb.status]).toEqual([200, 200]);
    const main = await tip("main");
    for (const r of [ra, rb]) {
      const { exitCode } = await git(["merge-base", "--is-ancestor", r.body.head_commit_sha, main], {
        dir: bareDir,
        okCodes: [1],
      });
      expect(exitCode).toBe(0);
    }
  });
});
