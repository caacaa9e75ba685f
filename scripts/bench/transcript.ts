import { randomUUID } from "node:crypto";
import type { RuntimeEntry } from "../../protocol/transcript.ts";
import { call, seedUser, startApi } from "../harness/api-server.ts";
import { type DatabaseKind, freshDatabase } from "../harness/databases.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const ENTRIES = 1000;
const READS = 60;
const TARGET_P50_MS = 20;

/** A long session's conversation: a third each the person's messages, the agent's texts, its tool calls. */
function conversation(): { user: string[]; runtime: RuntimeEntry[] } {
  const user: string[] = [];
  const runtime: RuntimeEntry[] = [];
  for (let i = 0; i < ENTRIES / 3; i++) {
    user.push(`Please look at step ${i}: ${"why does the build fail here? ".repeat(4)}`);
    const at = new Date(Date.UTC(2026, 10, 25, 12, 0, 0, i * 10)).toISOString();
    runtime.push({
      key: `prt_t${i}`,
      conversation: "ses_1",
      role: "assistant",
      text: `Step ${i}: ${"I looked at the **build** and found the cause. ".repeat(10)}`,
      tool: null,
      at,
    });
    runtime.push({
      key: `prt_x${i}`,
      conversation: "ses_1",
      role: "tool",
      text: "npm test",
      tool: {
        name: "bash",
        status: "completed",
        input: { command: "npm test" },
        output: `ok ${i}\n`.repeat(300),
        output_truncated: false,
      },
      at,
    });
  }
  return { user, runtime };
}

/** GET .../transcript of a 1,000-entry session against GET of the same session's row, both through the real API. */
export async function benchTranscriptRead(kind: DatabaseKind) {
  const db = await freshDatabase(kind);
  const api = await startApi(db.sql);
  try {
    const user = await seedUser(api.services);
    const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Long" } })).body;
    const sessionId = randomUUID();
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, 'stopped', $1, 'main', 'build', $4)`,
      [sessionId, user.accountId, project.id, user.userId],
    );
    const { user: said, runtime } = conversation();
    for (let i = 0; i < said.length; i++) {
      await api.services.transcripts.appendUser(sessionId, said[i]!);
      await api.services.transcripts.upsertRuntime(sessionId, runtime.slice(i * 2, i * 2 + 2));
    }
    const path = `/v1/projects/${project.id}/sessions/${sessionId}`;
    const check = await call(api.url, "GET", `${path}/transcript`, { token: user.token });
    if (check.body.length < ENTRIES - 1) throw new Error(`the transcript has ${check.body.length} entries`);
    const bytes = JSON.stringify(check.body).length;
    const get = (suffix: string) => () =>
      fetch(`${api.url}${path}${suffix}`, { headers: { authorization: `Bearer ${user.token}` } }).then((r) => r.text());
    // Taking turns, so load from anything else falls on both alike.
    const session: number[] = [];
    const transcript: number[] = [];
    for (let i = 0; i < READS / 10; i++) {
      session.push(...(await timeRuns(10, get(""))));
      transcript.push(...(await timeRuns(10, get("/transcript"))));
    }
    const p50 = percentile(transcript, 50);
    const base = percentile(session, 50);
    return {
      ok: p50 < TARGET_P50_MS,
      line:
        `transcript read (${kind}, ${check.body.length} entries, ${Math.round(bytes / 1024)} KiB): p50 ${ms(p50)} ms, ` +
        `p99 ${ms(percentile(transcript, 99))} ms vs the session's own row p50 ${ms(base)} ms = ${(p50 / base).toFixed(1)}x | target p50 < ${TARGET_P50_MS} ms`,
    };
  } finally {
    await api.close();
    await db.drop();
  }
}
