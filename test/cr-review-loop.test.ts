import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { type CrComment, CrCommentList } from "../protocol/cr-comment.ts";
import { call } from "./support/api-server.ts";
import { requireChromium } from "./support/browser.ts";
import { svc } from "./support/cli.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";

/** One bash step of the scripted agent, then its closing words. */
const bash = (command: string, done: string) => [
  { tool: "bash", args: { command, description: "commit and push" } },
  { text: done },
];
const commitAndPush = (message: string) => `git add -A && git commit -qm '${message}' && git push -q origin HEAD`;

/**
 * DESIGN "The review loop on a CR" on the real API, sandboxes and opencode with a scripted model: a comment sent to
 * the agent (from the CLI and from the dashboard in Chromium) reaches the model with its file, line and code, and the
 * agent's push updates the same CR: to a running origin session, to a stopped one (restarted), to a new session on
 * the head branch of a CR no session opened; `svc cr resolve` and the page's Resolve conflicts have the agent merge
 * the base and push.
 */
describe("the review loop: comments to the CR's agent, whose pushes update the same CR", () => {
  let sp: SandboxedProject;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let browser: Browser;
  let page: Page;
  let work: WorkRepo;
  let bare: string;
  let agentSession: string;

  const rest = (method: string, path: string, body?: unknown) =>
    call(sp.api.url, method, `/v1/projects/${sp.project.id}${path}`, { token: sp.user.token, body });
  const cr = async (n: number) => (await rest("GET", `/change-requests/${n}`)).body.change_request;
  const crCount = async () => (await rest("GET", "/change-requests?status=all")).body.change_requests.length;
  const comment = async (n: number, id: string): Promise<CrComment | undefined> =>
    CrCommentList.parse((await rest("GET", `/change-requests/${n}/comments`)).body).find((c) => c.id === id);
  const crPage = (n: number) => `${sp.api.url}/dashboard/projects/${sp.project.id}/crs/${n}`;
  const cli = (args: string[]) => svc(args, { env: sp.cliEnv });
  const transcriptText = async (sessionId: string) =>
    ((await rest("GET", `/sessions/${sessionId}/transcript`)).body as { role: string; text: string }[])
      .map((e) => `${e.role}: ${e.text}`)
      .join("\n");
  /** The CR's head once it is no longer `from`: the agent's push, seen through the API. */
  const headMovedFrom = (n: number, from: string) =>
    waitFor(
      `CR #${n}'s head to move from ${from.slice(0, 12)}`,
      async () => {
        const head = (await cr(n)).head_commit_sha as string;
        return head !== from && head;
      },
      { timeoutMs: 150_000, everyMs: 500 },
    );
  const delivered = (n: number, id: string) =>
    waitFor(
      "the comment's delivery",
      async () => {
        const c = await comment(n, id);
        if (c?.delivery === "failed") throw new Error(`delivery failed: ${c.delivery_error}`);
        return c?.delivery === "delivered" && c;
      },
      { timeoutMs: 150_000, everyMs: 500 },
    );
  /** The newest model turn that carries `text`: what the agent was shown. */
  const turnWith = (text: string) =>
    waitFor(
      `a model request carrying '${text}'`,
      async () => [...llm.turns()].reverse().find((t) => t.includes(text)),
      {
        timeoutMs: 150_000,
        everyMs: 500,
      },
    );
  /** main moves on conflict.txt the way a merged CR would move it (the API refuses pushes to main). */
  async function moveMain(content: string) {
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout("main");
    await work.git(["reset", "-q", "--hard", "origin/main"]);
    await work.commit("main moves", { "conflict.txt": content });
    await work.git(["push", "-q", bare, "main"]);
  }

  /** The CR's preview once it shows main's move (branch tips are cached for a second). */
  const conflicting = (n: number) =>
    waitFor("the preview to show the conflict", async () => {
      const preview = (await rest("GET", `/change-requests/${n}/merge-preview`)).body;
      if (preview.conflicts.length === 0) return false;
      expect(preview.conflicts).toEqual(["conflict.txt"]);
      return true;
    });

  beforeAll(async () => {
    llm = await startScriptedLlm([
      {
        when: "Start the greeting",
        steps: bash(
          `printf 'hello\\nworld\\n' > greet.txt && ${commitAndPush("greet")} && svc cr open --title 'Greeting'`,
          "Opened the CR.",
        ),
      },
      {
        when: "SHOUT-FIX",
        steps: bash(`printf 'HELLO\\nworld\\n' > greet.txt && ${commitAndPush("shout")}`, "Shouted."),
      },
      {
        when: "FAREWELL-FIX",
        steps: bash(`printf 'bye\\n' >> greet.txt && ${commitAndPush("farewell")}`, "Said bye."),
      },
      { when: "TOPIC-FIX", steps: bash(`echo fixed > topic.txt && ${commitAndPush("topic fix")}`, "Fixed the topic.") },
      {
        when: "cannot merge",
        steps: bash(
          "git fetch -q origin main && { git merge -q origin/main || true; } && printf 'resolved\\n' > conflict.txt && " +
            commitAndPush("merge main, conflicts resolved"),
          "Resolved.",
        ),
      },
    ]);
    sp = await startSandboxedProject(
      "Review loop",
      { llm: { baseUrl: llm.url, apiKey: "review", model: "scripted" } },
      { background: true },
    );
    bare = sp.api.services.repos.managedDir(sp.project.id);
    work = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await moveMain("one\ntwo\nthree\n");
    browser = await requireChromium();
    const link = await call(sp.api.url, "POST", "/v1/dashboard/sign-in-links", {
      token: sp.user.token,
      body: { next: `/dashboard/projects/${sp.project.id}` },
    });
    page = await (await browser.newContext()).newPage();
    await page.goto(link.body.url);
    await page.getByRole("button", { name: "Continue", exact: true }).click();
    await page.waitForURL(`**/dashboard/projects/${sp.project.id}`);
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await sp?.close();
    llm?.close();
  });

  it("svc cr comment --to-agent on a line: the running origin session's model gets the file, line, code and comment; its push updates the CR", async () => {
    const created = await rest("POST", "/sessions", { prompt: "Start the greeting feature." });
    expect(created.status).toBe(201);
    agentSession = created.body.session_id;
    const opened = await waitFor(
      "the agent's CR",
      async () => (await rest("GET", "/change-requests")).body.change_requests[0],
      { timeoutMs: 150_000, everyMs: 500 },
    );
    expect(opened).toMatchObject({ number: 1, head_ref: agentSession, origin_session_id: agentSession });
    await waitFor("the first run's end", async () => (await transcriptText(agentSession)).includes("Opened the CR."));

    const sent = await cli([
      "cr",
      "comment",
      "1",
      "Please SHOUT-FIX the greeting.",
      "--file",
      "greet.txt",
      "--line",
      "1",
      "--to-agent",
      "--json",
    ]);
    expect(sent.code, sent.stderr).toBe(0);
    const made = JSON.parse(sent.stdout) as CrComment;
    expect(made).toMatchObject({
      path: "greet.txt",
      line: 1,
      head_sha: opened.head_commit_sha,
      session_id: agentSession,
    });

    const turn = await turnWith("SHOUT-FIX");
    expect(turn).toContain("CR #1");
    expect(turn).toContain("File: greet.txt, line 1");
    // (A turn's messages may be JSON, its newlines escaped: each line is checked on its own.)
    expect(turn).toContain("> 1 | hello");
    expect(turn).toContain("  2 | world");
    expect(turn).toContain("Please SHOUT-FIX the greeting.");
    const head = await headMovedFrom(1, opened.head_commit_sha);
    expect((await git(["show", "-s", "--format=%s", head], { dir: bare })).stdout.trim()).toBe("shout");
    expect(await cr(1)).toMatchObject({ number: 1, status: "open", head_ref: agentSession });
    expect(await crCount()).toBe(1);
    await delivered(1, made.id);
    // It reached the agent as a message: the transcript has it.
    expect(await transcriptText(agentSession)).toContain("user: A review comment on CR #1");
  }, 300_000);

  it("the page's Send to agent wakes a stopped origin session, which hears the comment after its restored conversation", async () => {
    await waitFor("the shout run's end", async () => (await transcriptText(agentSession)).includes("Shouted."));
    expect((await rest("POST", `/sessions/${agentSession}/stop`, {})).status).toBe(200);
    await waitFor("stopped", async () => (await rest("GET", `/sessions/${agentSession}`)).body.status === "stopped");
    const before = (await cr(1)).head_commit_sha;

    await page.goto(crPage(1));
    await page.getByRole("textbox", { name: "Comment", exact: true }).fill("Also FAREWELL-FIX: say bye.");
    await page.locator("form.comment-box").getByRole("button", { name: "Send to agent" }).click();
    await page.waitForURL(/\/crs\/1#comments$/);
    const item = page.locator("li.comment", { hasText: "FAREWELL-FIX" });
    await expect(item.textContent()).resolves.toContain("sent to agent → session");
    await expect(item.getByRole("link", { name: `session ${agentSession.slice(0, 8)}` }).count()).resolves.toBe(1);
    const [made] = CrCommentList.parse((await rest("GET", "/change-requests/1/comments")).body).filter((c) =>
      c.body.includes("FAREWELL-FIX"),
    );
    expect(made).toMatchObject({ to_agent: true, session_id: agentSession, path: null });

    const turn = await turnWith("FAREWELL-FIX");
    // Restarted, not started over: the earlier conversation came back before the comment.
    expect(turn).toContain("SHOUT-FIX");
    await headMovedFrom(1, before);
    await delivered(1, made!.id);
    expect(await crCount()).toBe(1);
  }, 300_000);

  it("a click on a diff line opens its comment form; the line comment is listed with its place, a blank one refused in words", async () => {
    await page.goto(crPage(1));
    const file = page.locator("details.file", { hasText: "greet.txt" });
    await file.getByRole("link", { name: "+HELLO", exact: true }).click();
    await page.waitForURL(/\?path=greet\.txt&line=1#line-comment$/);
    const box = page.getByRole("textbox", { name: "Comment on greet.txt line 1" });
    await box.fill("   ");
    await page.locator("#line-comment").getByRole("button", { name: "Comment", exact: true }).click();
    await expect(page.getByRole("alert").textContent()).resolves.toContain("must not be empty");
    // The form stays open where the person was writing.
    await box.fill("LINE-NOTE: shouting is fine here.");
    await page.locator("#line-comment").getByRole("button", { name: "Comment", exact: true }).click();
    await page.waitForURL(/\/crs\/1#comments$/);
    await expect(page.locator("li.comment", { hasText: "LINE-NOTE" }).textContent()).resolves.toContain("greet.txt:1");
    const listed = CrCommentList.parse((await rest("GET", "/change-requests/1/comments")).body);
    expect(listed.find((c) => c.body.startsWith("LINE-NOTE"))).toMatchObject({
      path: "greet.txt",
      line: 1,
      to_agent: false,
      session_id: null,
      head_sha: (await cr(1)).head_commit_sha,
    });
    expect(listed.filter((c) => c.body.trim() === "")).toEqual([]);
  }, 120_000);

  it("a CR no session opened gets a new session on its head branch; svc cr resolve and Resolve conflicts have it merge the base", async () => {
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout("topic", { create: true, from: "origin/main" });
    await work.commit("topic", { "conflict.txt": "one\nTWO from topic\nthree\n" });
    await work.pushed("topic");
    const opened = await rest("POST", "/change-requests", { title: "Topic", head_ref: "topic" });
    expect(opened.status).toBe(201);
    const n = opened.body.number as number;

    const sent = await cli(["cr", "comment", String(n), "Please TOPIC-FIX it.", "--to-agent", "--json"]);
    expect(sent.code, sent.stderr).toBe(0);
    const made = JSON.parse(sent.stdout) as CrComment;
    expect(made.session_id).not.toBe(agentSession);
    const session = (await rest("GET", `/sessions/${made.session_id}`)).body;
    expect(session.branch).toBe("topic");
    const afterFix = await headMovedFrom(n, opened.body.head_commit_sha);
    await delivered(n, made.id);
    expect((await turnWith("TOPIC-FIX")).includes(`CR #${n}`)).toBe(true);
    expect(await crCount()).toBe(n);
    await waitFor("the fix run's end", async () =>
      (await transcriptText(made.session_id!)).includes("Fixed the topic."),
    );

    await moveMain("one\nTWO from main\nthree\n");
    await conflicting(n);
    const resolve = await cli(["cr", "resolve", String(n), "--json"]);
    expect(resolve.code, resolve.stderr).toBe(0);
    const asked = JSON.parse(resolve.stdout) as CrComment;
    expect(asked).toMatchObject({ kind: "resolve", to_agent: true, session_id: made.session_id });
    expect((await turnWith("cannot merge")).includes("git merge origin/main")).toBe(true);
    const resolved = await headMovedFrom(n, afterFix);
    await waitFor(
      "a clean preview",
      async () => (await rest("GET", `/change-requests/${n}/merge-preview`)).body.can_merge === true,
    );
    await waitFor("the resolve run's end", async () => (await transcriptText(made.session_id!)).includes("Resolved."));

    // Again from the page: main conflicts once more, and its button asks the same agent.
    await moveMain("one\nTWO from main, again\nthree\n");
    await conflicting(n);
    await page.goto(crPage(n));
    await page.getByRole("button", { name: "Resolve conflicts" }).click();
    await page.waitForURL(new RegExp(`/crs/${n}#comments$`));
    await expect(page.locator("li.comment", { hasText: "resolve conflicts" }).count()).resolves.toBe(2);
    await headMovedFrom(n, resolved);
    await waitFor(
      "a clean preview again",
      async () => (await rest("GET", `/change-requests/${n}/merge-preview`)).body.can_merge === true,
    );
    expect(await crCount()).toBe(n);
  }, 400_000);
});
