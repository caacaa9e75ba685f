import type { SandboxRecord, SandboxRecords } from "../../orchestrator/ports.ts";
import type { SandboxStatus, Session, SessionStatus } from "../../protocol/session.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import type { Events } from "../events.ts";
import { createTranscriptStore } from "./transcript-store.ts";

type SessionRow = Omit<Session, "created_at" | "updated_at"> & {
  account_id: string;
  initial_prompt: string | null;
  created_at: Date;
  updated_at: Date;
};

const SESSION_COLUMNS = `session_id, project_id, account_id, status, branch, base_ref, agent_name, agent_model,
  initial_prompt, sandbox_url, error, progress, created_by, trigger_slug as trigger, checkpoint_sha, created_at, updated_at`;

export type SessionRecord = Session & { account_id: string; initial_prompt: string | null };

const toSession = (r: SessionRow): SessionRecord => ({
  ...r,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

/** Sessions that hold a slot of the account's concurrent-session cap. */
const LIVE_STATUSES: SessionStatus[] = ["provisioning", "running"];

/**
 * The session cap, the one copy of its rule, inside the caller's transaction: locks the account's row, so that one
 * account's starts (creates, restarts, wakes, trigger firings; in this API process or any other on the database)
 * queue here and two of them never both take the last slot, then counts the account's live sessions other than
 * `except` (a session restarted in place keeps its own slot). `current` when the cap leaves no room, else undefined.
 * The lock is held until the caller's transaction ends, so its insert or update lands before the next start counts.
 */
async function capReached(tx: Sql, accountId: string, cap: number, except?: string): Promise<number | undefined> {
  await tx.query("select id from accounts where id = $1 for update", [accountId]);
  const live = await liveSessions(tx, accountId, except);
  return live >= cap ? live : undefined;
}

/** The account's sessions that hold a slot of its cap (checks' included), but `except`: what the cap counts. */
export async function liveSessions(sql: Sql, accountId: string, except?: string): Promise<number> {
  const [count] = await sql.query<{ n: number }>(
    `select count(*)::int as n from project_sessions
     where account_id = $1 and status = any($2::text[]) and session_id is distinct from $3::text`,
    [accountId, LIVE_STATUSES, except ?? null],
  );
  return count!.n;
}

/**
 * Session and sandbox rows; the sandbox half is what the orchestrator's provisioner reads and writes. Every write of
 * a session's status or progress, whoever makes it (routes, provisioner, reconciler, sweeper), emits
 * `session.changed`.
 */
export function createSessionStore(sql: Sql, events: Events) {
  const changed = (row: Pick<SessionRecord, "project_id" | "session_id" | "status" | "progress">) =>
    events.emit("session.changed", {
      projectId: row.project_id,
      sessionId: row.session_id,
      status: row.status,
      progress: row.progress ?? null,
    });
  const store = {
    /** Inserts a `provisioning` session unless the account already has `cap` live ones (checked atomically). */
    async createWithinCap(input: {
      accountId: string;
      projectId: string;
      baseRef: string;
      agentName: string;
      agentModel: string | null;
      initialPrompt: string | null;
      createdBy: string;
      /** The manifest trigger that spawns it, if any. */
      trigger?: string | null;
      cap: number;
      /** The API process that provisions it (cluster.ts). */
      provisioner: string;
      /** The id a warm-pool sandbox was made for (its labels and branch name carry it); else a new one. */
      sessionId?: string;
      /** `check`: the sandbox of a CR's check (api/checks/), counted by the cap, never listed. Default `agent`. */
      purpose?: "agent" | "check";
      /** An existing branch the session works on (a CR's head, for its review feedback); default its own, `<id>`. */
      branch?: string;
    }): Promise<{ session: SessionRecord } | { current: number }> {
      const created = await sql.transaction<{ session: SessionRecord } | { current: number }>(async (tx) => {
        const current = await capReached(tx, input.accountId, input.cap);
        if (current !== undefined) return { current };
        const [row] = await tx.query<SessionRow>(
          `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name, agent_model,
             initial_prompt, created_by, provisioner, trigger_slug, purpose)
           values ($1, $2, $3, 'provisioning', coalesce($12::text, $1), $4, $5, $6, $7, $8, $9, $10, $11)
           returning ${SESSION_COLUMNS}`,
          [
            input.sessionId ?? crypto.randomUUID(),
            input.accountId,
            input.projectId,
            input.baseRef,
            input.agentName,
            input.agentModel,
            input.initialPrompt,
            input.createdBy,
            input.provisioner,
            input.trigger ?? null,
            input.purpose ?? "agent",
            input.branch ?? null,
          ],
        );
        // The first prompt (a person's, a trigger's) is the transcript's first entry, committed with the session.
        if (input.initialPrompt) await createTranscriptStore(tx).appendUser(row!.session_id, input.initialPrompt);
        return { session: toSession(row!) };
      });
      // Once committed: a listener that reads the row finds it.
      if ("session" in created) changed(created.session);
      return created;
    },

    /**
     * Moves a session back to `provisioning` (a restart, a stopped session woken) if it is still in one of `from`
     * and the account's cap has room for it: the check and the update in one transaction, under the rule and the
     * lock createWithinCap takes. `current` when the cap refuses (nothing changed), undefined when the session is
     * gone or in none of `from`.
     */
    async restartWithinCap(input: {
      sessionId: string;
      accountId: string;
      from: SessionStatus[];
      cap: number;
      /** The API process that provisions it (cluster.ts). */
      provisioner: string;
    }): Promise<{ session: SessionRecord } | { current: number } | undefined> {
      const moved = await sql.transaction<{ session: SessionRecord } | { current: number } | undefined>(async (tx) => {
        const current = await capReached(tx, input.accountId, input.cap, input.sessionId);
        if (current !== undefined) return { current };
        const [row] = await tx.query<SessionRow>(
          `update project_sessions set status = 'provisioning', progress = null, error = null, sandbox_url = null,
             provisioner = $4, updated_at = now()
           where session_id = $1 and account_id = $2 and status = any($3::text[]) returning ${SESSION_COLUMNS}`,
          [input.sessionId, input.accountId, input.from, input.provisioner],
        );
        return row && { session: toSession(row) };
      });
      if (moved && "session" in moved) changed(moved.session);
      return moved;
    },

    async get(projectId: string, sessionId: string): Promise<SessionRecord | undefined> {
      const [row] = await sql.query<SessionRow>(
        `select ${SESSION_COLUMNS} from project_sessions where project_id = $1 and session_id = $2`,
        [projectId, sessionId],
      );
      return row && toSession(row);
    },

    /** The project a session id belongs to, whoever asks: callers check access before showing anything. */
    async projectOf(sessionId: string): Promise<string | undefined> {
      const [row] = await sql.query<{ project_id: string }>(
        "select project_id from project_sessions where session_id = $1",
        [sessionId],
      );
      return row?.project_id;
    },

    async list(projectId: string): Promise<SessionRecord[]> {
      const rows = await sql.query<SessionRow>(
        `select ${SESSION_COLUMNS} from project_sessions where project_id = $1 and purpose = 'agent'
         order by created_at desc`,
        [projectId],
      );
      return rows.map(toSession);
    },

    /** Moves a session only if it is still in one of `from`: the state machine's guard under races. */
    async transition(
      sessionId: string,
      from: SessionStatus[],
      to: SessionStatus,
      fields: { error?: string | null; sandboxUrl?: string | null; provisioner?: string } = {},
    ) {
      const rows = await sql.query<{ project_id: string; session_id: string; status: SessionStatus }>(
        `update project_sessions set status = $3, progress = null, error = case when $6 then $4 else error end,
           sandbox_url = case when $7 then $5 else sandbox_url end, provisioner = coalesce($8, provisioner),
           updated_at = now()
         where session_id = $1 and status = any($2::text[]) returning project_id, session_id, status`,
        [
          sessionId,
          from,
          to,
          fields.error ?? null,
          fields.sandboxUrl ?? null,
          fields.error !== undefined,
          fields.sandboxUrl !== undefined,
          fields.provisioner ?? null,
        ],
      );
      for (const row of rows) changed({ ...row, progress: null });
      return rows.length > 0;
    },

    async setProgress(sessionId: string, progress: string): Promise<void> {
      const rows = await sql.query<{ project_id: string }>(
        "update project_sessions set progress = $2 where session_id = $1 and status = 'provisioning' returning project_id",
        [sessionId, progress],
      );
      for (const row of rows)
        changed({ project_id: row.project_id, session_id: sessionId, status: "provisioning", progress });
    },

    async provisioningSessions(): Promise<{ session_id: string; provisioner: string | null }[]> {
      return sql.query("select session_id, provisioner from project_sessions where status = 'provisioning'");
    },

    async remove(sessionId: string): Promise<void> {
      await sql.query("delete from project_sessions where session_id = $1", [sessionId]);
    },

    async insertSandbox(input: {
      sessionId: string;
      projectId: string;
      serviceKeyHash: string;
      serviceKeySealed: string | null;
      tokenId: string;
      sandboxId?: string;
    }): Promise<string> {
      const [row] = await sql.query<{ sandbox_id: string }>(
        `insert into session_sandboxes (sandbox_id, session_id, project_id, status, service_key_hash, service_key_enc, token_id)
         values (coalesce($6::uuid, gen_random_uuid()), $1, $2, 'provisioning', $3, $4, $5) returning sandbox_id`,
        [
          input.sessionId,
          input.projectId,
          input.serviceKeyHash,
          input.serviceKeySealed,
          input.tokenId,
          input.sandboxId ?? null,
        ],
      );
      return row!.sandbox_id;
    },

    async updateSandbox(
      sandboxId: string,
      fields: { status?: SandboxStatus; containerId?: string; image?: string; url?: string; error?: string },
    ): Promise<void> {
      // The first move to an end state is when the sandbox stopped: usage counts it until then.
      await sql.query(
        `update session_sandboxes set status = coalesce($2, status), container_id = coalesce($3, container_id),
           image = coalesce($4, image), url = coalesce($5, url), error = coalesce($6, error), updated_at = now(),
           stopped_at = case when $2 in ('stopped', 'error', 'archived') then coalesce(stopped_at, now())
             else stopped_at end
         where sandbox_id = $1`,
        [
          sandboxId,
          fields.status ?? null,
          fields.containerId ?? null,
          fields.image ?? null,
          fields.url ?? null,
          fields.error ?? null,
        ],
      );
    },

    /** The session's current sandbox: the newest one. */
    async currentSandbox(sessionId: string): Promise<SandboxRecord | undefined> {
      const [row] = await sql.query<SandboxRecord>(
        `select sandbox_id, session_id, project_id, status, container_id, url, token_id, created_at
         from session_sandboxes where session_id = $1 order by created_at desc limit 1`,
        [sessionId],
      );
      return row;
    },

    async sealedServiceKey(sandboxId: string): Promise<string | null> {
      const [row] = await sql.query<{ service_key_enc: string | null }>(
        "select service_key_enc from session_sandboxes where sandbox_id = $1",
        [sandboxId],
      );
      return row?.service_key_enc ?? null;
    },

    /** The provisioning or active sandbox a service key (by its hash) belongs to: the egress proxy's credential. */
    async liveSandboxByKey(serviceKeyHash: string): Promise<SandboxRecord | undefined> {
      const [row] = await sql.query<SandboxRecord>(
        `select sandbox_id, session_id, project_id, status, container_id, url, token_id, created_at
         from session_sandboxes where service_key_hash = $1 and status in ('provisioning', 'active')`,
        [serviceKeyHash],
      );
      return row;
    },

    /** Provisioning and active sandboxes, with the API process provisioning their session. */
    async liveSandboxes(): Promise<(SandboxRecord & { provisioner: string | null })[]> {
      return sql.query(
        `select b.sandbox_id, b.session_id, b.project_id, b.status, b.container_id, b.url, b.token_id, b.created_at,
           s.provisioner
         from session_sandboxes b join project_sessions s using (session_id) where b.status in ('provisioning', 'active')`,
      );
    },

    /** The session's checkpoint ref as its repository holds it now (after a push of its sandbox). */
    async setCheckpoint(sessionId: string, sha: string | null): Promise<void> {
      await sql.query("update project_sessions set checkpoint_sha = $2 where session_id = $1", [sessionId, sha]);
    },

    async touchActivity(sandboxId: string, at: string): Promise<void> {
      await sql.query("update session_sandboxes set last_activity_at = $2 where sandbox_id = $1", [sandboxId, at]);
    },
  };
  return store satisfies SandboxRecords;
}

export type SessionStore = ReturnType<typeof createSessionStore>;
