import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, svc } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { sendSlackEvent, startSlackWebApi } from "./support/slack.ts";

const SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const BOT_TOKEN = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy";
const TEAM = "T0TEAM001";
const CHANNEL = "C0CHAN001";
const APP_USER = "U0APPBOT1";
const PERSON = "U0PERSON1";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `svc channels` against the real stack (real sandbox, real opencode, the scripted model) and a loopback Slack:
 * events signed as Slack signs them go to the API, and `chat.postMessage` receives what the API posts back.
 */
describe("svc channels: a Slack thread drives a session and hears its answer and its CRs", () => {
  let sandboxed: SandboxedProject;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let slack: Awaited<ReturnType<typeof startSlackWebApi>>;
  let env: CliEnv;
  let eventsUrl: string;
  let sessionId: string;
  let mentionTs: string;
  const run = (args: string[]) => svc(args, { env });
  const send = (payload: unknown, options: { timestamp?: number; signature?: string; secret?: string } = {}) =>
    sendSlackEvent(eventsUrl, payload, { secret: SIGNING_SECRET, ...options });
  const sessions = async () => (await sandboxed.sessions()).body.sessions as { session_id: string }[];

  /** An Events API callback as Slack sends it for `event` in the workspace. */
  const callback = (event: Record<string, unknown>, eventId = `Ev${randomUUID().slice(0, 8).toUpperCase()}`) => ({
    token: "legacy-verification-token",
    team_id: TEAM,
    api_app_id: "A0APP0001",
    type: "event_callback",
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ team_id: TEAM, user_id: APP_USER, is_bot: true }],
    event: { event_ts: event.ts, ...event },
  });
  const mention = (text: string, ts: string, channel = CHANNEL) =>
    callback({ type: "app_mention", user: PERSON, text: `<@${APP_USER}> ${text}`, ts, channel });

  /** Waits until the thread `ts` has a post matching `pattern` (the API posts after answering Slack). */
  async function posted(pattern: RegExp, thread: string, timeoutMs = 150_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = slack.posted.find((p) => p.thread_ts === thread && pattern.test(p.text));
      if (hit) return hit.text;
      if (Date.now() > deadline) {
        throw new Error(`no post matching ${pattern} in thread ${thread}; posts: ${JSON.stringify(slack.posted)}`);
      }
      await sleep(250);
    }
  }

  beforeAll(async () => {
    llm = await startScriptedLlm([
      {
        when: "Add a greeting",
        steps: [
          {
            tool: "bash",
            args: {
              command:
                "echo hello > greeting.txt && git add greeting.txt && git commit -qm 'add greeting' && git push -q origin HEAD && svc cr open --title 'Add greeting'",
              description: "commit, push and open a CR",
            },
          },
          { text: "Added greeting.txt and opened a change request." },
        ],
      },
      { when: "What did you change", steps: [{ text: "I added greeting.txt with one line." }] },
      {
        when: "Say goodbye too",
        steps: [
          {
            tool: "bash",
            args: {
              command:
                "echo bye > bye.txt && git add bye.txt && git commit -qm 'add bye' && git push -q origin HEAD && svc cr open --title 'Add bye'",
              description: "commit, push and open a second CR",
            },
          },
          { text: "Added bye.txt in a second change request." },
        ],
      },
    ]);
    slack = await startSlackWebApi(BOT_TOKEN);
    sandboxed = await startSandboxedProject(
      "Chatty",
      { llm: { baseUrl: llm.url, apiKey: "test-key", model: "scripted" } },
      { slack: { signingSecret: SIGNING_SECRET, botToken: BOT_TOKEN, apiUrl: slack.apiUrl } },
    );
    eventsUrl = `${sandboxed.api.url}/v1/channels/slack/events`;
    env = sandboxed.cliEnv;
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
    llm?.close();
    slack?.close();
  });

  it("answers Slack's url_verification challenge, only when signed", async () => {
    const challenge = {
      token: "legacy",
      challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
      type: "url_verification",
    };
    const answered = await send(challenge);
    expect(answered).toEqual({ status: 200, body: { challenge: challenge.challenge } });
    const unsigned = await send(challenge, { signature: `v0=${"0".repeat(64)}` });
    expect(unsigned.status).toBe(401);
    expect(unsigned.body.code).toBe("SIGNATURE_INVALID");
  });

  it("svc channels connect / ls / disconnect, with exit codes and --json", async () => {
    const empty = await run(["channels"]);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toBe("");
    expect(empty.stderr).toContain("no channels connected");

    const connected = await run(["channels", "connect", CHANNEL, "--team", TEAM]);
    expect(connected.code, connected.stderr).toBe(0);
    const id = connected.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);

    const listed = await run(["channels", "ls", "--json"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({
        id,
        channel_id: CHANNEL,
        team_id: TEAM,
        provider: "slack",
        connected_by: sandboxed.user.userId,
      }),
    ]);
    const bare = await run(["channels"]);
    expect(bare.stdout.split("\t").slice(0, 3)).toEqual([CHANNEL, "slack", TEAM]);

    // The same channel again, here or in another project: one channel drives one project.
    const again = await run(["channels", "connect", CHANNEL]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("CHANNEL_TAKEN, HTTP 409");
    const token = sandboxed.user.token;
    const other = (await call(sandboxed.api.url, "POST", "/v1/projects", { token, body: { name: "Other" } })).body;
    const elsewhere = await call(sandboxed.api.url, "POST", `/v1/projects/${other.id}/channels`, {
      token,
      body: { provider: "slack", channel_id: CHANNEL },
    });
    expect(elsewhere.status).toBe(409);
    const notHers = await call(sandboxed.api.url, "DELETE", `/v1/projects/${other.id}/channels/${id}`, { token });
    expect(notHers.status).toBe(404);

    expect((await run(["channels", "connect", "not-a-channel"])).code).toBe(2);
    expect((await run(["channels", "connect", "C0SPARE01", "--team", "nope"])).code).toBe(2);
    expect((await run(["channels", "lst"])).code).toBe(2);

    const spare = await run(["channels", "connect", "C0SPARE01", "--json"]);
    expect(JSON.parse(spare.stdout)).toMatchObject({ channel_id: "C0SPARE01", team_id: null });
    const gone = await run(["channels", "disconnect", "C0SPARE01"]);
    expect(gone.code, gone.stderr).toBe(0);
    expect(gone.stderr).toContain("disconnected Slack channel C0SPARE01");
    const unknown = await run(["channels", "disconnect", "C0SPARE01"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("CHANNEL_NOT_FOUND, HTTP 404");
    expect(JSON.parse((await run(["channels", "--json"])).stdout)).toHaveLength(1);
  });

  it("a forged signature or a stale timestamp is refused with 401 and changes nothing", async () => {
    const forged = await send(mention("Add a greeting", "1700000001.000001"), { secret: "not-the-signing-secret" });
    expect(forged.status).toBe(401);
    expect(forged.body).toMatchObject({ code: "SIGNATURE_INVALID" });
    const stale = await send(mention("Add a greeting", "1700000002.000001"), {
      timestamp: Math.floor(Date.now() / 1000) - 6 * 60,
    });
    expect(stale.status).toBe(401);
    const missing = await fetch(eventsUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(mention("Add a greeting", "1700000003.000001")),
    });
    expect(missing.status).toBe(401);
    // A mention in a channel nobody connected: acknowledged, nothing else.
    const unconnected = await send(mention("Add a greeting", "1700000004.000001", "C0NOBODY1"));
    expect(unconnected).toEqual({ status: 200, body: { ok: true } });
    await sleep(1500);
    expect(await sessions()).toEqual([]);
    expect(slack.posted).toEqual([]);
  });

  it("a mention starts a session: the thread gets the session link, the agent's answer and its CR", async () => {
    mentionTs = "1700000100.000200";
    const event = mention("Add a greeting file, please.", mentionTs);
    const started = Date.now();
    const first = await send(event);
    expect(first).toEqual({ status: 200, body: { ok: true } });
    expect(Date.now() - started).toBeLessThan(3000);
    // Slack retries what it thinks failed, with the same event id: one session all the same.
    const retried = await send(event);
    expect(retried.status).toBe(200);

    const ack = await posted(/^Started session /, mentionTs, 30_000);
    [sessionId] = /[0-9a-f-]{36}/.exec(ack)!;
    expect(ack).toBe(
      `Started session ${sessionId}: ${sandboxed.api.url}/dashboard/projects/${sandboxed.project.id}/sessions/${sessionId}`,
    );
    const opened = await posted(/^Opened CR #1/, mentionTs);
    expect(opened).toBe(
      `Opened CR #1: Add greeting — ${sandboxed.api.url}/dashboard/projects/${sandboxed.project.id}/crs/1`,
    );
    await posted(/^Added greeting\.txt and opened a change request\.$/, mentionTs);
    console.log(`mention -> answer in the thread (sandbox start included): ${Date.now() - started} ms`);
    expect((await sessions()).map((s) => s.session_id)).toEqual([sessionId]);
    expect(slack.posted.every((p) => p.channel === CHANNEL)).toBe(true);
    expect(slack.refused).toEqual([]);
  }, 240_000);

  it("a reply in the thread goes to the same session; the bot's own posts are ignored", async () => {
    const before = slack.posted.length;
    const bot = await send(
      callback({
        type: "message",
        subtype: "bot_message",
        bot_id: "B0BOT0001",
        text: "What did you change?",
        ts: "1700000150.000001",
        thread_ts: mentionTs,
        channel: CHANNEL,
      }),
    );
    expect(bot.status).toBe(200);
    const reply = await send(
      callback({
        type: "message",
        user: PERSON,
        text: "What did you change?",
        ts: "1700000200.000300",
        thread_ts: mentionTs,
        channel: CHANNEL,
      }),
    );
    expect(reply.status).toBe(200);
    await posted(/^I added greeting\.txt with one line\.$/, mentionTs, 60_000);
    expect(slack.posted.slice(before).map((p) => p.text)).toEqual(["I added greeting.txt with one line."]);
    // A bare mention gets a usage line, not a session.
    await send(mention("", "1700000300.000400"));
    expect(await posted(/^Mention me with what to do/, "1700000300.000400", 10_000)).toBeTruthy();
    expect((await sessions()).map((s) => s.session_id)).toEqual([sessionId]);
  }, 90_000);

  it("merging the CR posts a one-line update in the thread", async () => {
    const merged = await run(["cr", "merge", "1"]);
    expect(merged.code, merged.stderr).toBe(0);
    expect(await posted(/^CR #1 merged/, mentionTs, 10_000)).toBe("CR #1 merged by user");
  });

  it("a reply to a stopped session restarts it first; a CR it opens and closing that CR reach the thread", async () => {
    const stopped = await run(["sessions", "stop", sessionId]);
    expect(stopped.code, stopped.stderr).toBe(0);
    await send(
      callback({
        type: "message",
        user: PERSON,
        text: "Say goodbye too",
        ts: "1700000400.000500",
        thread_ts: mentionTs,
        channel: CHANNEL,
      }),
    );
    expect(await posted(/restarting it/, mentionTs, 10_000)).toBe(`Session ${sessionId} was stopped; restarting it…`);
    expect(await posted(/^Opened CR #2/, mentionTs)).toBe(
      `Opened CR #2: Add bye — ${sandboxed.api.url}/dashboard/projects/${sandboxed.project.id}/crs/2`,
    );
    await posted(/^Added bye\.txt in a second change request\.$/, mentionTs);
    expect((await sessions()).map((s) => s.session_id)).toEqual([sessionId]);

    const closed = await run(["cr", "close", "2"]);
    expect(closed.code, closed.stderr).toBe(0);
    expect(await posted(/^CR #2 closed/, mentionTs, 10_000)).toBe("CR #2 closed by user");
  }, 180_000);
});

/**
 * Issue 26, item 3: a channel bound by one account must not be bound by another, whatever workspace either names,
 * and two connects racing on one channel (one naming a workspace, one not) must not both win: on PostgreSQL, where
 * they really run at once.
 */
describe("a channel binding is unique across accounts", () => {
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let bob: Awaited<ReturnType<typeof seedUser>>;
  let aliceProject: string;
  let bobProject: string;

  const connect = (who: { token: string }, projectId: string, body: { channel_id: string; team_id?: string }) =>
    call(api.url, "POST", `/v1/projects/${projectId}/channels`, { token: who.token, body });
  const channelsOf = async (who: { token: string }, projectId: string) =>
    (await call(api.url, "GET", `/v1/projects/${projectId}/channels`, { token: who.token })).body.channels;

  beforeAll(async () => {
    db = await freshDatabase("postgres");
    api = await startApi(db.sql);
    alice = await seedUser(api.services, "alice");
    bob = await seedUser(api.services, "bob");
    const project = async (who: { token: string }) =>
      (await call(api.url, "POST", "/v1/projects", { token: who.token, body: { name: "Chat" } })).body.id as string;
    aliceProject = await project(alice);
    bobProject = await project(bob);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("answers another account's connect with 409 CHANNEL_TAKEN and changes nothing", async () => {
    const first = await connect(alice, aliceProject, { channel_id: "C0TAKEN01", team_id: TEAM });
    expect(first.status).toBe(201);
    const noTeam = await connect(alice, aliceProject, { channel_id: "C0TAKEN02" });
    expect(noTeam.status).toBe(201);
    for (const body of [
      { channel_id: "C0TAKEN01", team_id: TEAM },
      { channel_id: "C0TAKEN01" },
      { channel_id: "C0TAKEN02" },
      { channel_id: "C0TAKEN02", team_id: TEAM },
    ]) {
      const res = await connect(bob, bobProject, body);
      expect(res.status, JSON.stringify(body)).toBe(409);
      expect(res.body.code).toBe("CHANNEL_TAKEN");
    }
    expect(await channelsOf(bob, bobProject)).toEqual([]);
    expect(await channelsOf(alice, aliceProject)).toEqual([first.body, noTeam.body]);
  });

  it("lets one of two racing connects of a channel win, with or without a workspace", async () => {
    const channels = Array.from({ length: 20 }, (_, i) => `C0RACE${String(i).padStart(3, "0")}`);
    const results = await Promise.all(
      channels.map((channel_id) =>
        Promise.all([
          connect(alice, aliceProject, { channel_id }),
          connect(bob, bobProject, { channel_id, team_id: TEAM }),
        ]),
      ),
    );
    for (const [i, pair] of results.entries())
      expect(pair.map((r) => r.status).sort(), channels[i]).toEqual([201, 409]);
    const rows = await db.sql.query<{ n: number }>(
      "select count(*)::int as n from channels where channel_id like 'C0RACE%' group by channel_id having count(*) > 1",
    );
    expect(rows).toEqual([]);
  });
});
