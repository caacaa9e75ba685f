import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";

describe.each(databaseKinds("postgres"))("usage: sandbox-seconds and sessions per project per day (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let web: { id: string; slug: string };
  let docs: { id: string; slug: string };

  const usage = (query: string) => call(api.url, "GET", `/v1/accounts/usage${query}`, { token: user.token });

  /** A session row as the API writes them, created at `at`. */
  async function session(
    projectId: string,
    at: string,
    options: { purpose?: "agent" | "check"; status?: string } = {},
  ) {
    const sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name,
         created_by, purpose, created_at)
       values ($1, $2, $3, $4, $1, 'main', 'build', $5, $6, $7)`,
      [sessionId, user.accountId, projectId, options.status ?? "stopped", user.userId, options.purpose ?? "agent", at],
    );
    return sessionId;
  }
  /** One of its sandboxes: created at `from`, stopped at `to` (null: still live). */
  async function sandbox(sessionId: string, projectId: string, from: string, to: string | null) {
    const [row] = await db.sql.query<{ sandbox_id: string }>(
      `insert into session_sandboxes (session_id, project_id, status, service_key_hash, created_at, stopped_at)
       values ($1, $2, $3, $4, $5, $6) returning sandbox_id`,
      [sessionId, projectId, to ? "stopped" : "active", randomUUID(), from, to],
    );
    return row!.sandbox_id;
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    user = await seedUser(api.services, "metered");
    const create = async (name: string) =>
      (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name } })).body;
    web = await create("Web");
    docs = await create("Docs");

    // Web, day 1: a session whose sandbox runs from 23:00 past midnight to 01:30 (1 h on day 1, 1.5 h on day 2),
    // restarted on day 2 for 10 minutes; a CR check of 45 s on day 2.
    const long = await session(web.id, "2024-03-01T22:59:00Z");
    await sandbox(long, web.id, "2024-03-01T23:00:00Z", "2024-03-02T01:30:00Z");
    await sandbox(long, web.id, "2024-03-02T10:00:00Z", "2024-03-02T10:10:00Z");
    const check = await session(web.id, "2024-03-02T12:00:00Z", { purpose: "check" });
    await sandbox(check, web.id, "2024-03-02T12:00:00Z", "2024-03-02T12:00:45Z");
    // Docs: one session on day 2 that never got a sandbox (failed), one on day 4, outside the window below.
    await session(docs.id, "2024-03-02T08:00:00Z", { status: "failed" });
    const later = await session(docs.id, "2024-03-04T08:00:00Z");
    await sandbox(later, docs.id, "2024-03-04T08:00:00Z", "2024-03-04T08:20:00Z");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("cuts each sandbox's life at UTC midnights, counts check sessions apart, and sums the days", async () => {
    const res = await usage("?from=2024-03-01&to=2024-03-03");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const day = (date: string, p: { id: string; slug: string }, counts: Record<string, number>) => ({
      date,
      project_id: p.id,
      project: p.slug,
      sessions: 0,
      sandbox_seconds: 0,
      check_sessions: 0,
      check_sandbox_seconds: 0,
      ...counts,
    });
    expect(res.body).toEqual({
      from: "2024-03-01",
      to: "2024-03-03",
      days: [
        day("2024-03-01", web, { sessions: 1, sandbox_seconds: 3600 }),
        day("2024-03-02", docs, { sessions: 1 }),
        day("2024-03-02", web, { sandbox_seconds: 5400 + 600, check_sessions: 1, check_sandbox_seconds: 45 }),
      ],
      totals: { sessions: 2, sandbox_seconds: 3600 + 6000, check_sessions: 1, check_sandbox_seconds: 45 },
    });

    // One day: the sandbox that crossed midnight counts from 00:00; the session created the day before does not.
    const second = await usage("?from=2024-03-02&to=2024-03-02");
    expect(second.body.days.map((d: { project: string }) => d.project)).toEqual([docs.slug, web.slug]);
    expect(second.body.totals).toEqual({
      sessions: 1,
      sandbox_seconds: 6000,
      check_sessions: 1,
      check_sandbox_seconds: 45,
    });
  });

  it("counts a live sandbox until now, and one stopped through the session store until its stop", async () => {
    const live = await session(web.id, new Date(Date.now() - 120_000).toISOString(), { status: "running" });
    const sandboxId = await sandbox(live, web.id, new Date(Date.now() - 100_000).toISOString(), null);
    const today = (await usage("")).body;
    const webToday = today.days.find((d: { project_id: string }) => d.project_id === web.id);
    expect(webToday.sessions).toBe(1);
    expect(webToday.sandbox_seconds).toBeGreaterThanOrEqual(100);
    expect(webToday.sandbox_seconds).toBeLessThan(160);

    // The store's move to `stopped` records when; from then on the sandbox counts no more, and a later move to
    // another end state keeps the first stop.
    await api.services.sessionStore.updateSandbox(sandboxId, { status: "stopped" });
    const stoppedAt = async () =>
      (
        await db.sql.query<{ stopped_at: Date }>("select stopped_at from session_sandboxes where sandbox_id = $1", [
          sandboxId,
        ])
      )[0]!.stopped_at;
    const first = await stoppedAt();
    expect(Date.now() - new Date(first).getTime()).toBeLessThan(10_000);
    const webSeconds = async () =>
      (await usage("")).body.days.find((d: { project_id: string }) => d.project_id === web.id).sandbox_seconds;
    const atStop = await webSeconds();
    await new Promise((r) => setTimeout(r, 1500));
    await api.services.sessionStore.updateSandbox(sandboxId, { status: "archived" });
    expect(new Date(await stoppedAt()).getTime()).toBe(new Date(first).getTime());
    expect(await webSeconds()).toBe(atStop);
  });

  it("takes 30 days up to today by default, and refuses bad dates with 400 naming the field", async () => {
    const res = await usage("");
    const today = new Date().toISOString().slice(0, 10);
    expect(res.body.to).toBe(today);
    // 30 days, today included.
    expect((Date.parse(res.body.to) - Date.parse(res.body.from)) / 86_400_000).toBe(29);
    for (const [query, field] of <[string, string][]>[
      ["?from=2024-13-01", "from"],
      ["?from=yesterday", "from"],
      ["?to=2024-02-30", "to"],
      ["?from=2024-03-02&to=2024-03-01", "from"],
      ["?from=2020-01-01&to=2024-01-01", "from"],
      ["?project=web", "project"],
    ]) {
      const bad = await usage(query);
      expect(bad.status, query).toBe(400);
      expect(bad.body, query).toMatchObject({ code: "VALIDATION_FAILED", field });
    }
  });
});
