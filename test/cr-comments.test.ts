import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CrComment, CrCommentList } from "../protocol/cr-comment.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { cliHome, svc } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { noSandboxes, settings } from "./support/no-sandboxes.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";
import { waitFor } from "./support/wait.ts";

const APP = `${Array.from({ length: 20 }, (_, i) => `app line ${i + 1}`).join("\n")}\n`;
/** APP with line 10 changed: the diff shows lines 7-13 of app.txt (three of context either side). */
const APP_EDITED = APP.replace("app line 10\n", "app line 10, edited\n");

/**
 * DESIGN "The review loop on a CR": comments on a CR over real HTTP and the real CLI, on PGlite and PostgreSQL,
 * with a session service whose driver runs no sandbox (a prompt's delivery there fails, and is recorded so).
 */
describe("CR comments: general and line comments, who may write them, and prompts for the CR's agent", () => {
  describe.each(databaseKinds("pglite"))("%s", (kind) => {
    let db: TestDatabase;
    let api: TestApi;
    let user: Awaited<ReturnType<typeof seedUser>>;
    let email: string;
    let projectId: string;
    let work: WorkRepo;
    /** The session that opened CR `own`, with its sandbox's own token. */
    let agent: { sessionId: string; sessionToken?: string };
    const crs = { topic: 0, own: 0 };

    const req = (method: string, suffix: string, body?: unknown, token = user.token) =>
      call(api.url, method, `/v1/projects/${projectId}/change-requests${suffix}`, { token, body });
    const comments = async (n: number) => CrCommentList.parse((await req("GET", `/${n}/comments`)).body);
    const stored = async () => (await db.sql.query<{ n: number }>("select count(*)::int as n from cr_comments"))[0]!.n;
    const cli = (args: string[]) =>
      svc([...args, "--project", projectId], {
        env: { ...cliHome().env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: user.token },
      });

    /** A branch off main with `files` committed and pushed, and a CR opened from it. */
    async function openCr(head: string, files: Record<string, string | null>, sessionId?: string) {
      await work.git(["fetch", "-q", "origin"]);
      await work.checkout(head, { create: true, from: "origin/main" });
      await work.commit(`work on ${head}`, files);
      await work.pushed(`HEAD:refs/heads/${head}`);
      const opened = await req("POST", "", { title: `CR ${head}`, head_ref: head, session_id: sessionId });
      expect(opened.status, JSON.stringify(opened.body)).toBe(201);
      expect(opened.body.origin_session_id).toBe(sessionId ?? null);
      return opened.body.number as number;
    }

    beforeAll(async () => {
      db = await freshDatabase(kind);
      api = await startApi(db.sql, {
        orchestrator: {
          driver: noSandboxes,
          settings: { ...settings, sessionCap: 1 },
          root: process.cwd(),
          baseImage: "none",
        },
      });
      user = await seedUser(api.services);
      email = (await call(api.url, "GET", "/v1/accounts/me", { token: user.token })).body.user.email;
      const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Reviewed" } });
      projectId = created.body.id;
      work = await workRepo(authedUrl(created.body.repo_url, user.token));
      await work.commit("initial", { "app.txt": APP, "old.txt": "old\n" });
      await work.pushed("main");
      crs.topic = await openCr("topic", { "app.txt": APP_EDITED, "new.txt": "new\n", "old.txt": null });
      agent = await seedLiveSandbox(api.services.sql, user, projectId, { tokens: api.services.tokens });
      crs.own = await openCr(agent.sessionId, { "agent.txt": "from the agent\n" }, agent.sessionId);
    });
    afterAll(async () => {
      await api?.close();
      await db?.drop();
    });

    it("comments in general and on a line of the diff, each with the head it was made at; lists them in order", async () => {
      const cr = (await req("GET", `/${crs.topic}`)).body.change_request;
      const general = await req("POST", `/${crs.topic}/comments`, { body: "  Nice work overall.\n" });
      expect(general.status, JSON.stringify(general.body)).toBe(201);
      expect(CrComment.parse(general.body)).toMatchObject({
        kind: "comment",
        author: email,
        author_session_id: null,
        body: "Nice work overall.",
        path: null,
        line: null,
        head_sha: cr.head_commit_sha,
        to_agent: false,
        session_id: null,
        delivery: null,
      });
      const onLine = await req("POST", `/${cr.cr_id}/comments`, { body: "Why edit this?", path: "app.txt", line: 10 });
      expect(onLine.status, JSON.stringify(onLine.body)).toBe(201);
      expect(onLine.body).toMatchObject({ path: "app.txt", line: 10, head_sha: cr.head_commit_sha });
      // A context line the hunk shows, a whole new file, and a file the CR deletes (no line of it shown).
      for (const where of [{ path: "app.txt", line: 7 }, { path: "new.txt", line: 1 }, { path: "old.txt" }])
        expect((await req("POST", `/${crs.topic}/comments`, { body: "here", ...where })).status).toBe(201);

      // The head moves: a new comment records the new head, the earlier ones keep theirs.
      await work.checkout("topic");
      const moved = await work.commit("more", { "new.txt": "new\nand more\n" });
      await work.pushed("topic");
      const later = await req("POST", `/${crs.topic}/comments`, { body: "And now?", path: "new.txt", line: 2 });
      expect(later.status, JSON.stringify(later.body)).toBe(201);
      expect(later.body.head_sha).toBe(moved);

      const listed = await comments(crs.topic);
      expect(listed.map((c) => [c.body, c.path, c.line])).toEqual([
        ["Nice work overall.", null, null],
        ["Why edit this?", "app.txt", 10],
        ["here", "app.txt", 7],
        ["here", "new.txt", 1],
        ["here", "old.txt", null],
        ["And now?", "new.txt", 2],
      ]);
      expect(listed[1]!.head_sha).toBe(cr.head_commit_sha);
      expect(listed[0]).toEqual(general.body);
      // By id as by number; another CR has none.
      expect(CrCommentList.parse((await req("GET", `/${cr.cr_id}/comments`)).body)).toEqual(listed);
      expect(await comments(crs.own)).toEqual([]);
    });

    it("refuses every bad comment with 400 and a message naming the problem, storing nothing", async () => {
      const before = await stored();
      const refused: [unknown, string, RegExp][] = [
        [{ body: "" }, "body", /must not be empty/],
        [{ body: " \n\t " }, "body", /must not be empty/],
        [{}, "body", /body/],
        [{ body: 3 }, "body", /body/],
        [{ body: "x\u0000y" }, "body", /NUL/],
        [{ body: "x", line: 3 }, "line", /give path with it/],
        [{ body: "x", path: "app.txt", line: 0 }, "line", /line/],
        [{ body: "x", path: "app.txt", line: "10" }, "line", /line/],
        [{ body: "x", path: "" }, "path", /path/],
        [{ body: "x", to_agent: "yes" }, "to_agent", /to_agent/],
        [{ body: "x", reviewer: "me" }, "reviewer", /unknown body field: reviewer/],
        [{ body: "x", path: "README.md" }, "path", /README\.md is not among the files CR #\d+ changes/],
        [
          { body: "x", path: "app.txt", line: 2 },
          "line",
          /line 2 of app\.txt is not in CR #\d+'s diff \(it shows lines 7-13\)/,
        ],
        [{ body: "x", path: "old.txt", line: 1 }, "line", /it shows no line of it/],
      ];
      for (const [body, field, message] of refused) {
        const res = await req("POST", `/${crs.topic}/comments`, body);
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.code).toBe("VALIDATION_FAILED");
        expect(res.body.field, JSON.stringify(body)).toBe(field);
        expect(res.body.error, JSON.stringify(body)).toMatch(message);
      }
      const missing = await req("POST", "/999/comments", { body: "x" });
      expect([missing.status, missing.body.code]).toEqual([404, "CR_NOT_FOUND"]);
      expect(await stored()).toBe(before);
    });

    it("a session's own token comments on its session's CR only, never to an agent; a minted project token as its person", async () => {
      const before = await stored();
      const answer = await req("POST", `/${crs.own}/comments`, { body: "Fixed in the next push." }, agent.sessionToken);
      expect(answer.status, JSON.stringify(answer.body)).toBe(201);
      expect(answer.body).toMatchObject({
        author: `session ${agent.sessionId}`,
        author_session_id: agent.sessionId,
        to_agent: false,
      });
      const elsewhere = await req("POST", `/${crs.topic}/comments`, { body: "Me too." }, agent.sessionToken);
      expect([elsewhere.status, elsewhere.body.code]).toEqual([403, "SESSION_SCOPE"]);
      const prompting = await req(
        "POST",
        `/${crs.own}/comments`,
        { body: "Do it", to_agent: true },
        agent.sessionToken,
      );
      expect([prompting.status, prompting.body.code]).toEqual([403, "SESSION_SCOPE"]);
      const resolving = await req("POST", `/${crs.own}/resolve`, undefined, agent.sessionToken);
      expect([resolving.status, resolving.body.code]).toEqual([403, "SESSION_SCOPE"]);
      // Reading is open to it, as every CR route is.
      expect((await req("GET", `/${crs.topic}/comments`, undefined, agent.sessionToken)).status).toBe(200);
      expect(await stored()).toBe(before + 1);

      const minted = (
        await call(api.url, "POST", `/v1/projects/${projectId}/cli-token`, { token: user.token, body: {} })
      ).body.token;
      const scripted = await req("POST", `/${crs.topic}/comments`, { body: "From a script." }, minted);
      expect(scripted.status, JSON.stringify(scripted.body)).toBe(201);
      expect(scripted.body).toMatchObject({ author: email, author_session_id: null });
    });

    it("to_agent: a stopped origin session is restarted for it; the comment keeps its session and a failed delivery", async () => {
      await db.sql.query("update project_sessions set status = 'stopped' where session_id = $1", [agent.sessionId]);
      const sent = await req("POST", `/${crs.own}/comments`, {
        body: "Rename agent.txt to AGENT.md.",
        path: "agent.txt",
        line: 1,
        to_agent: true,
      });
      expect(sent.status, JSON.stringify(sent.body)).toBe(201);
      expect(sent.body).toMatchObject({ to_agent: true, session_id: agent.sessionId, delivery: "pending" });
      // Restarted: no sandbox runs here, so it fails, and the comment says why it never reached the agent.
      const failed = await waitFor(
        "the delivery recorded as failed",
        async () => (await comments(crs.own)).find((c) => c.id === sent.body.id && c.delivery === "failed"),
        { timeoutMs: 30_000 },
      );
      expect(failed.delivery_error).toContain(`session ${agent.sessionId} is failed`);
      expect(failed.delivery_error).toContain("this test runs no sandboxes");
      const session = (
        await call(api.url, "GET", `/v1/projects/${projectId}/sessions/${agent.sessionId}`, {
          token: user.token,
        })
      ).body;
      expect(session.status).toBe("failed");
    });

    it("to_agent without an agent session starts one on the CR's head branch with the prompt; the next goes to it; a full cap refuses, storing nothing", async () => {
      const sent = await req("POST", `/${crs.topic}/comments`, {
        body: "Keep line 10 as it was.",
        path: "app.txt",
        line: 10,
        to_agent: true,
      });
      expect(sent.status, JSON.stringify(sent.body)).toBe(201);
      const sessionId = sent.body.session_id as string;
      expect(sessionId).not.toBe(agent.sessionId);
      const [session] = await db.sql.query<{ branch: string; initial_prompt: string; created_by: string }>(
        "select branch, initial_prompt, created_by from project_sessions where session_id = $1",
        [sessionId],
      );
      expect(session).toMatchObject({ branch: "topic", created_by: user.userId });
      const prompt = session!.initial_prompt;
      expect(prompt).toContain(`CR #${crs.topic} "CR topic" from ${email}`);
      expect(prompt).toContain("File: app.txt, line 10 (at commit ");
      expect(prompt).toContain("   9 | app line 9\n> 10 | app line 10, edited\n  11 | app line 11");
      expect(prompt).toContain("Comment:\nKeep line 10 as it was.");
      expect(prompt).toContain("git push origin HEAD");
      // The first prompt is the new session's first transcript entry.
      const transcript = (
        await call(api.url, "GET", `/v1/projects/${projectId}/sessions/${sessionId}/transcript`, {
          token: user.token,
        })
      ).body;
      expect(transcript[0]).toMatchObject({ role: "user", text: prompt });
      await waitFor(
        "its delivery recorded",
        async () => (await comments(crs.topic)).find((c) => c.id === sent.body.id)?.delivery === "failed",
        { timeoutMs: 30_000 },
      );

      // The CR's agent is that session from now on (restarted, as it failed).
      const next = await req("POST", `/${crs.topic}/comments`, { body: "And add a test.", to_agent: true });
      expect(next.status, JSON.stringify(next.body)).toBe(201);
      expect(next.body.session_id).toBe(sessionId);
      await waitFor(
        "the second delivery recorded",
        async () => (await comments(crs.topic)).find((c) => c.id === next.body.id)?.delivery === "failed",
        { timeoutMs: 30_000 },
      );

      // Another live session takes the account's only slot: starting the agent again is refused.
      await seedLiveSandbox(api.services.sql, user, projectId);
      const before = await stored();
      const sessions = await db.sql.query("select session_id from project_sessions");
      const full = await req("POST", `/${crs.topic}/comments`, { body: "One more thing.", to_agent: true });
      expect([full.status, full.body.code]).toEqual([429, "SESSION_CAP_REACHED"]);
      expect(await stored()).toBe(before);
      expect(await db.sql.query("select session_id from project_sessions")).toEqual(sessions);
    });

    it("a merged CR takes comments but not to the agent; resolve refuses a CR that is not open or does not conflict", async () => {
      const done = await openCr("done", { "done.txt": "done\n" });
      const head = (await req("GET", `/${done}`)).body.change_request.head_commit_sha;
      expect((await req("POST", `/${done}/merge`, { head_sha: head })).status).toBe(200);
      const note = await req("POST", `/${done}/comments`, { body: "Thanks!", path: "done.txt", line: 1 });
      expect(note.status, JSON.stringify(note.body)).toBe(201);
      expect(note.body.head_sha).toBe(head);
      const before = await stored();
      const prompt = await req("POST", `/${done}/comments`, { body: "More", to_agent: true });
      expect([prompt.status, prompt.body.code]).toEqual([409, "CR_MERGED"]);
      const resolveMerged = await req("POST", `/${done}/resolve`);
      expect([resolveMerged.status, resolveMerged.body.code]).toEqual([409, "CR_NOT_OPEN"]);
      const clean = await req("POST", `/${crs.own}/resolve`);
      expect([clean.status, clean.body.code]).toEqual([409, "NO_CONFLICTS"]);
      expect(clean.body.error).toContain("without conflicts");
      expect((await req("POST", `/${crs.own}/resolve`, { now: true })).status).toBe(400);
      expect(await stored()).toBe(before);
    });

    it("svc cr comment and svc cr comments: JSON, rows, flags checked before anything is sent, refusals in words", async () => {
      const made = await cli([
        "cr",
        "comment",
        `#${crs.own}`,
        "Please add a README line.",
        "--file",
        "agent.txt",
        "--line",
        "1",
        "--json",
      ]);
      expect(made.code, made.stderr).toBe(0);
      const comment = CrComment.parse(JSON.parse(made.stdout));
      expect(comment).toMatchObject({ body: "Please add a README line.", path: "agent.txt", line: 1, to_agent: false });
      const plain = await cli(["cr", "comment", String(crs.own), "Second thought"]);
      expect(plain.code, plain.stderr).toBe(0);
      expect(plain.stderr).toContain(`✓ commented on CR #${crs.own}`);
      expect(plain.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);

      const listed = await cli(["cr", "comments", String(crs.own), "--json"]);
      expect(listed.code, listed.stderr).toBe(0);
      expect(CrCommentList.parse(JSON.parse(listed.stdout))).toEqual(await comments(crs.own));
      // Off a terminal: tab-separated rows, no header.
      const rows = (await cli(["cr", "comments", String(crs.own)])).stdout
        .trim()
        .split("\n")
        .map((r) => r.split("\t"));
      const row = rows.find((r) => r[4] === "Please add a README line.")!;
      expect(row.slice(1, 4)).toEqual([email, "agent.txt:1", "-"]);
      expect(rows.find((r) => r[3] !== "-")?.[3]).toMatch(
        new RegExp(`^session ${agent.sessionId.slice(0, 8)} \\(failed: `),
      );

      const before = await stored();
      for (const [args, message] of [
        [["--line", "3"], "--line: a line is a line of a file: give path with it"],
        [["--file", "agent.txt", "--line", "x"], "must be a positive integer"],
        [["--file", "agent.txt", "--line", "0"], "must be a positive integer"],
      ] as const) {
        const bad = await cli(["cr", "comment", String(crs.own), "text", ...args]);
        expect(bad.code, bad.stderr).toBe(2);
        expect(bad.stderr).toContain(message);
      }
      const empty = await cli(["cr", "comment", String(crs.own), "   "]);
      expect([empty.code, empty.stderr]).toEqual([2, expect.stringContaining("<text>: must not be empty")]);
      const outside = await cli(["cr", "comment", String(crs.own), "text", "--file", "agent.txt", "--line", "5"]);
      expect(outside.code).toBe(1);
      expect(outside.stderr).toContain("line 5 of agent.txt is not in CR");
      expect(outside.stderr).toContain("VALIDATION_FAILED");
      const resolve = await cli(["cr", "resolve", String(crs.own)]);
      expect(resolve.code).toBe(1);
      expect(resolve.stderr).toContain("NO_CONFLICTS");
      expect(await stored()).toBe(before);
      const none = await cli(["cr", "comments", "999"]);
      expect([none.code, none.stderr]).toEqual([1, expect.stringContaining("CR_NOT_FOUND")]);
    });
  });
});
