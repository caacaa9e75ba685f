import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, type Reply, type seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, type TestDatabase } from "./support/databases.ts";
import { noSandboxes, settings, type TwoAccountApi, twoAccountApi } from "./support/no-sandboxes.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";

/** How often `svc sessions new` read a starting session before it waited on the API. */
const CLI_POLL_MS = 250;

describe.each(databaseKinds("pglite"))("GET …/sessions/{sid}?wait_for=running (%s)", (kind) => {
  let stack: TwoAccountApi;
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let bob: Awaited<ReturnType<typeof seedUser>>;
  let aliceProject: string;
  let bobProject: string;

  const get = (path: string, token = alice.token) => call(api.url, "GET", path, { token });
  const sessionPath = (sessionId: string, query = "", project = aliceProject) =>
    `/v1/projects/${project}/sessions/${sessionId}${query}`;

  /** A new session of Alice's project, `provisioning` as a created one is. */
  async function starting(): Promise<string> {
    const created = await api.services.sessionStore.createWithinCap({
      accountId: alice.accountId,
      projectId: aliceProject,
      baseRef: "main",
      agentName: "build",
      agentModel: null,
      initialPrompt: null,
      createdBy: alice.userId,
      cap: 100,
      provisioner: api.services.instanceId,
    });
    if (!("session" in created)) throw new Error("session cap reached");
    return created.session.session_id;
  }

  /** Sends the read and tells when it answered; `pending()` is true until it has. */
  function waiting(path: string) {
    let answeredAt: number | undefined;
    const reply = get(path).then((res) => {
      answeredAt = Date.now();
      return res;
    });
    return { reply, pending: () => answeredAt === undefined, answeredAt: () => answeredAt! };
  }

  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  beforeAll(async () => {
    stack = await twoAccountApi(kind);
    ({ db, api, alice, bob, aliceProject, bobProject } = stack);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("answers as soon as the session runs, well within the CLI's old poll interval", async () => {
    const sessionId = await starting();
    const read = waiting(sessionPath(sessionId, "?wait_for=running&timeout_s=30"));
    await pause(300);
    expect(read.pending()).toBe(true);

    const movedAt = Date.now();
    expect(
      await api.services.sessionStore.transition(sessionId, ["provisioning"], "running", {
        sandboxUrl: "http://sandbox.test:8000",
        error: null,
      }),
    ).toBe(true);
    const res = await read.reply;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      session_id: sessionId,
      status: "running",
      sandbox_url: "http://sandbox.test:8000",
    });
    expect(read.answeredAt() - movedAt).toBeLessThan(CLI_POLL_MS / 2);
  });

  it("answers within a second when another API process of the cluster started the session (no event here)", async () => {
    const sessionId = await starting();
    const read = waiting(sessionPath(sessionId, "?wait_for=running&timeout_s=30"));
    await pause(300);
    expect(read.pending()).toBe(true);
    // What the process that provisions it writes, seen here only through the database.
    const movedAt = Date.now();
    await db.sql.query("update project_sessions set status = 'running' where session_id = $1", [sessionId]);
    expect((await read.reply).body).toMatchObject({ session_id: sessionId, status: "running" });
    expect(read.answeredAt() - movedAt).toBeLessThan(1000);
  });

  it("answers a failed session too, and one that already left provisioning at once", async () => {
    const sessionId = await starting();
    const read = waiting(sessionPath(sessionId, "?wait_for=running"));
    await pause(100);
    expect(read.pending()).toBe(true);
    await api.services.sessionStore.transition(sessionId, ["provisioning"], "failed", { error: "no image" });
    expect((await read.reply).body).toMatchObject({ status: "failed", error: "no image" });

    const askedAt = Date.now();
    const again = await get(sessionPath(sessionId, "?wait_for=running&timeout_s=30"));
    expect(again.body.status).toBe("failed");
    expect(Date.now() - askedAt).toBeLessThan(CLI_POLL_MS);
  });

  it("answers when the progress is another than the one the client shows", async () => {
    const sessionId = await starting();
    const read = waiting(sessionPath(sessionId, "?wait_for=running&progress="));
    await pause(100);
    expect(read.pending()).toBe(true);
    const movedAt = Date.now();
    await api.services.sessionStore.setProgress(sessionId, "building image: step 2/5 RUN make");
    const res = await read.reply;
    expect(res.body).toMatchObject({ status: "provisioning", progress: "building image: step 2/5 RUN make" });
    expect(read.answeredAt() - movedAt).toBeLessThan(CLI_POLL_MS / 2);

    // The same line again is no news; the next one is.
    const same = encodeURIComponent("building image: step 2/5 RUN make");
    const next = waiting(sessionPath(sessionId, `?wait_for=running&progress=${same}`));
    await api.services.sessionStore.setProgress(sessionId, "building image: step 2/5 RUN make");
    await pause(200);
    expect(next.pending()).toBe(true);
    await api.services.sessionStore.setProgress(sessionId, "starting sandbox");
    expect((await next.reply).body.progress).toBe("starting sandbox");

    // Without `progress`, a progress line does not end the wait.
    const status = waiting(sessionPath(sessionId, "?wait_for=running"));
    await api.services.sessionStore.setProgress(sessionId, "cloning workspace");
    await pause(200);
    expect(status.pending()).toBe(true);
    await api.services.sessionStore.transition(sessionId, ["provisioning"], "stopped");
    expect((await status.reply).body).toMatchObject({ status: "stopped", progress: null });
  });

  it("answers the session as it is when the timeout passes", async () => {
    const sessionId = await starting();
    const askedAt = Date.now();
    const res = await get(sessionPath(sessionId, "?wait_for=running&timeout_s=1"));
    const took = Date.now() - askedAt;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ session_id: sessionId, status: "provisioning" });
    expect(took).toBeGreaterThanOrEqual(950);
    expect(took).toBeLessThan(3000);
  });

  it("answers at once, as before, without wait_for", async () => {
    const sessionId = await starting();
    const askedAt = Date.now();
    const res = await get(sessionPath(sessionId));
    expect(Date.now() - askedAt).toBeLessThan(CLI_POLL_MS);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ session_id: sessionId, status: "provisioning" });
    expect(Object.keys(res.body).sort()).toEqual(
      Object.keys((await get(sessionPath(sessionId, "?wait_for=running&timeout_s=1"))).body).sort(),
    );
  });

  it("refuses bad parameters with 400", async () => {
    const sessionId = await starting();
    const bad: [string, string][] = [
      ["?wait_for=stopped", "wait_for"],
      ["?wait_for=", "wait_for"],
      ["?wait_for=running&wait_for=running", "wait_for"],
      ["?wait_for=running&timeout_s=0", "timeout_s"],
      ["?wait_for=running&timeout_s=61", "timeout_s"],
      ["?wait_for=running&timeout_s=1.5", "timeout_s"],
      ["?wait_for=running&timeout_s=abc", "timeout_s"],
      ["?wait_for=running&timeout_s=", "timeout_s"],
      ["?wait_for=running&progress=a&progress=b", "progress"],
      [`?wait_for=running&progress=${"x".repeat(1001)}`, "progress"],
      ["?timeout_s=5", "wait_for"],
      ["?progress=x", "wait_for"],
      ["?wait_for=running&timeout=5", "timeout"],
    ];
    for (const [query, field] of bad) {
      const askedAt = Date.now();
      const res = await get(sessionPath(sessionId, query));
      expect(res.status, query).toBe(400);
      expect(res.body, query).toMatchObject({ code: "VALIDATION_FAILED", field });
      expect(Date.now() - askedAt, query).toBeLessThan(1000);
    }
  });

  it("answers other projects' sessions, and a session token's siblings, as the other session routes do", async () => {
    const sessionId = await starting();
    const bobsSession = await seedLiveSandbox(db.sql, bob, bobProject);
    const sandbox = await seedLiveSandbox(db.sql, alice, aliceProject, { tokens: api.services.tokens });
    const wait = "?wait_for=running&timeout_s=30";
    const cases: { path: string; token: string; status: number; code: string }[] = [
      // Alice's session asked for under Bob's project, by Bob: not in his project.
      { path: sessionPath(sessionId, "", bobProject), token: bob.token, status: 404, code: "SESSION_NOT_FOUND" },
      // Alice's project, by Bob: not a member of its account.
      { path: sessionPath(sessionId), token: bob.token, status: 403, code: "NOT_A_MEMBER" },
      // Bob's session under Alice's project: no such session there.
      { path: sessionPath(bobsSession.sessionId), token: alice.token, status: 404, code: "SESSION_NOT_FOUND" },
      // A session's own token asking for a sibling.
      { path: sessionPath(sessionId), token: sandbox.sessionToken!, status: 403, code: "SESSION_SCOPE" },
    ];
    for (const c of cases) {
      const plain: Reply = await get(c.path, c.token);
      const askedAt = Date.now();
      const waited: Reply = await get(`${c.path}${wait}`, c.token);
      expect(Date.now() - askedAt, c.path).toBeLessThan(1000);
      expect({ status: waited.status, code: waited.body.code }, c.path).toEqual({ status: c.status, code: c.code });
      expect({ status: plain.status, code: plain.body.code }, c.path).toEqual({ status: c.status, code: c.code });
    }
    // Its own session, to the session's token: the wait answers, at once for a session that runs.
    await api.services.sessionStore.transition(sandbox.sessionId, ["provisioning"], "running");
    const askedAt = Date.now();
    const own = await get(sessionPath(sandbox.sessionId, wait), sandbox.sessionToken!);
    expect([own.status, own.body.status]).toEqual([200, "running"]);
    expect(Date.now() - askedAt).toBeLessThan(CLI_POLL_MS);
  });

  it("answers its waiting reads when the API closes, rather than hold the close up", async () => {
    const sessionId = await starting();
    const other = await startApi(db.sql, {
      orchestrator: { driver: noSandboxes, settings, root: process.cwd(), baseImage: "none" },
    });
    const read = call(other.url, "GET", sessionPath(sessionId, "?wait_for=running&timeout_s=30"), {
      token: alice.token,
    });
    await pause(200);
    const closingAt = Date.now();
    await other.close();
    const res = await read;
    expect(Date.now() - closingAt).toBeLessThan(2000);
    expect([res.status, res.body.status]).toEqual([200, "provisioning"]);
  });

  it("answers at once when the session is removed meanwhile", async () => {
    const sessionId = await starting();
    const read = waiting(sessionPath(sessionId, "?wait_for=running&timeout_s=30"));
    await pause(100);
    const removedAt = Date.now();
    const removed = await call(api.url, "DELETE", sessionPath(sessionId), { token: alice.token });
    expect(removed.status).toBe(204);
    const res = await read.reply;
    // Woken by the stop that removing starts with: the session as stopped, or gone if the row went first.
    if (res.status === 200) expect(res.body.status).toBe("stopped");
    else expect([res.status, res.body.code]).toEqual([404, "SESSION_NOT_FOUND"]);
    expect(read.answeredAt() - removedAt).toBeLessThan(1000);
  });
});
