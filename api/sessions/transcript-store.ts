import { randomUUID } from "node:crypto";
import type { RuntimeEntry, TranscriptEntry, TranscriptTool } from "../../protocol/transcript.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

type EntryRow = {
  seq: string | number;
  rev: string | number;
  role: TranscriptEntry["role"];
  text: string;
  at: Date | string;
  conversation: string | null;
  tool: TranscriptTool | string | null;
};

const toEntry = (r: EntryRow): TranscriptEntry => ({
  seq: Number(r.seq),
  rev: Number(r.rev),
  role: r.role,
  text: r.text,
  at: iso(r.at),
  conversation: r.conversation,
  // The PostgreSQL driver hands jsonb back parsed; PGlite may hand back its text.
  tool: typeof r.tool === "string" ? (JSON.parse(r.tool) as TranscriptTool) : r.tool,
});

type UserEntry = { sessionId: string; key: string };

/**
 * A session's stored conversation (migration 0019). The person's messages are appended where they enter the API;
 * the agent's parts are upserted by the runtime's part id each time the daemon reports them, so a part seen twice
 * (a recorder that reconnected, two replicas) is stored once and only a real change moves its `rev`.
 */
export function createTranscriptStore(sql: Sql) {
  /**
   * Every write of a session's transcript holds its session row: revs are then taken in the order their writes
   * commit, so a reader that saw rev N never later meets a smaller rev committed after its read.
   */
  const locked = (sessionId: string, write: (tx: Sql) => Promise<unknown>) =>
    sql.transaction(async (tx) => {
      await tx.query("select 1 from project_sessions where session_id = $1 for update", [sessionId]);
      await write(tx);
    });
  return {
    /** A person's message; its key, to name the conversation once the agent took it, or to take it back. */
    async appendUser(sessionId: string, text: string): Promise<UserEntry> {
      const key = `user:${randomUUID()}`;
      await locked(sessionId, (tx) =>
        tx.query(
          `insert into session_transcript (session_id, entry_key, role, text, at) values ($1, $2, 'user', $3, now())`,
          [sessionId, key, text],
        ),
      );
      return { sessionId, key };
    },

    async setConversation(entry: UserEntry, conversation: string): Promise<void> {
      await locked(entry.sessionId, (tx) =>
        tx.query(
          `update session_transcript set conversation = $3, rev = nextval('session_transcript_rev')
           where session_id = $1 and entry_key = $2`,
          [entry.sessionId, entry.key, conversation],
        ),
      );
    },

    /** A message the agent never got. */
    async remove(entry: UserEntry): Promise<void> {
      await sql.query("delete from session_transcript where session_id = $1 and entry_key = $2", [
        entry.sessionId,
        entry.key,
      ]);
    },

    /** The agent's parts, in one statement; a part whose text and tool did not change is left as it was. */
    async upsertRuntime(sessionId: string, entries: RuntimeEntry[]): Promise<void> {
      if (entries.length === 0) return;
      // One row may be changed once per statement: the last report of a part is the one that counts.
      const latest = [...new Map(entries.map((e) => [e.key, e])).values()];
      await locked(sessionId, (tx) =>
        tx.query(
          `insert into session_transcript (session_id, entry_key, role, conversation, text, tool, at)
         select $1, e.key, e.role, e.conversation, e.text, e.tool, e.at
         from jsonb_to_recordset($2::text::jsonb) as e(key text, role text, conversation text, text text, tool jsonb, at timestamptz)
         on conflict (session_id, entry_key) do update
           set text = excluded.text, tool = excluded.tool, rev = nextval('session_transcript_rev')
           where (session_transcript.text, session_transcript.tool) is distinct from (excluded.text, excluded.tool)`,
          [sessionId, JSON.stringify(latest)],
        ),
      );
    },

    /** Oldest first; with `afterRev`, only the entries added or changed since. */
    async read(sessionId: string, afterRev = 0): Promise<TranscriptEntry[]> {
      const rows = await sql.query<EntryRow>(
        `select seq, rev, role, text, at, conversation, tool from session_transcript
         where session_id = $1 and rev > $2 order by seq`,
        [sessionId, afterRev],
      );
      return rows.map(toEntry);
    },
  };
}

export type TranscriptStore = ReturnType<typeof createTranscriptStore>;
