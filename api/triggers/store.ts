import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

export type TriggerState = {
  slug: string;
  last_fired_at: string | null;
  last_session_id: string | null;
  last_error: string | null;
  last_refused_at: string | null;
  last_refusal: string | null;
};

/** trigger_state and trigger_firings (migration 0010): the runtime half of the manifest's triggers. */
export function createTriggerStore(sql: Sql) {
  return {
    async states(projectId: string): Promise<Map<string, TriggerState>> {
      const rows = await sql.query<TriggerState & { last_fired_at: Date | null; last_refused_at: Date | null }>(
        `select slug, last_fired_at, last_session_id, last_error, last_refused_at, last_refusal from trigger_state
         where project_id = $1`,
        [projectId],
      );
      return new Map(
        rows.map((r) => [
          r.slug,
          { ...r, last_fired_at: iso(r.last_fired_at), last_refused_at: iso(r.last_refused_at) },
        ]),
      );
    },

    /** See TriggerPort.scheduled: `scheduled_since` restarts when the schedule changes or stops. */
    async scheduled(projectId: string, slug: string, schedule: string | null) {
      if (schedule === null) {
        await sql.query(
          `update trigger_state set schedule = null, scheduled_since = null, updated_at = now()
           where project_id = $1 and slug = $2 and schedule is not null`,
          [projectId, slug],
        );
        return { since: new Date(), lastClaimed: null };
      }
      const [row] = await sql.query<{ since: Date; last_claimed: Date | null }>(
        `with s as (
           insert into trigger_state (project_id, slug, schedule, scheduled_since) values ($1, $2, $3, now())
           on conflict (project_id, slug) do update set
             scheduled_since = case when trigger_state.schedule is not distinct from excluded.schedule
               and trigger_state.scheduled_since is not null then trigger_state.scheduled_since else now() end,
             schedule = excluded.schedule, updated_at = now()
           returning scheduled_since)
         select (select scheduled_since from s) as since,
           (select max(scheduled_at) from trigger_firings where project_id = $1 and slug = $2 and not manual) as last_claimed`,
        [projectId, slug, schedule],
      );
      return { since: new Date(row!.since), lastClaimed: row!.last_claimed && new Date(row!.last_claimed) };
    },

    /** Inserts the instant's unique row: true for the one caller that inserted it. */
    async claim(projectId: string, slug: string, scheduledAt: Date, claimedBy: string, manual = false) {
      const rows = await sql.query(
        `insert into trigger_firings (project_id, slug, scheduled_at, manual, claimed_by) values ($1, $2, $3, $4, $5)
         on conflict do nothing returning slug`,
        [projectId, slug, scheduledAt, manual, claimedBy],
      );
      return rows.length > 0;
    },

    /**
     * The outcome of a claimed firing, on its row and on the trigger's state: a session moves `last_fired_at`, a
     * refusal only `last_refused_at`, so a trigger the session cap keeps refusing never looks as if it ran.
     */
    async recordFiring(
      projectId: string,
      slug: string,
      scheduledAt: Date,
      outcome: { sessionId: string } | { error: string },
    ): Promise<void> {
      const sessionId = "sessionId" in outcome ? outcome.sessionId : null;
      const error = "error" in outcome ? outcome.error : null;
      await sql.transaction(async (tx) => {
        await tx.query(
          "update trigger_firings set session_id = $4, error = $5 where project_id = $1 and slug = $2 and scheduled_at = $3",
          [projectId, slug, scheduledAt, sessionId, error],
        );
        if (sessionId !== null)
          await tx.query(
            `insert into trigger_state (project_id, slug, last_fired_at, last_session_id) values ($1, $2, now(), $3)
             on conflict (project_id, slug) do update set last_fired_at = now(),
               last_session_id = excluded.last_session_id, last_error = null, updated_at = now()`,
            [projectId, slug, sessionId],
          );
        else
          await tx.query(
            `insert into trigger_state (project_id, slug, last_error, last_refused_at, last_refusal)
             values ($1, $2, $3, now(), $3)
             on conflict (project_id, slug) do update set last_error = excluded.last_error, last_refused_at = now(),
               last_refusal = excluded.last_refusal, updated_at = now()`,
            [projectId, slug, error],
          );
      });
    },

    /** Projects with a CR merged after `cursor` (less a margin for merges committing late), and the next cursor. */
    async movedSince(cursor: string | null): Promise<{ projectIds: string[]; cursor: string }> {
      const [now] = await sql.query<{ now: Date }>("select now() as now");
      if (cursor === null) return { projectIds: [], cursor: iso(now!.now) };
      // A merge, or a push or fetch that another process saw move the default branch's manifest record.
      const rows = await sql.query<{ project_id: string }>(
        `select project_id from change_requests
           where merged_at > $1::timestamptz - interval '2 seconds' and merged_at <= $2
         union
         select project_id from project_manifests
           where updated_at > $1::timestamptz - interval '2 seconds' and updated_at <= $2`,
        [cursor, now!.now],
      );
      return { projectIds: rows.map((r) => r.project_id), cursor: iso(now!.now) };
    },

    /** Every project's id (the scheduler's full resync). */
    async projectIds(): Promise<string[]> {
      return (await sql.query<{ id: string }>("select id from projects order by created_at")).map((r) => r.id);
    },

    /**
     * Who a trigger's sessions are created by: the project's creator while a member of its account, else the
     * account's first owner, then its first admin, then its first member; never a viewer, whose sessions' tokens
     * could open no CR (a session's token acts with its person's role).
     */
    async actingUser(projectId: string): Promise<string | undefined> {
      const [row] = await sql.query<{ user_id: string }>(
        `select m.user_id from projects p join memberships m on m.account_id = p.account_id
         where p.id = $1 and m.role <> 'viewer'
         order by coalesce(m.user_id = p.created_by, false) desc,
           case m.role when 'owner' then 0 when 'admin' then 1 else 2 end, m.created_at limit 1`,
        [projectId],
      );
      return row?.user_id;
    },
  };
}

export type TriggerStore = ReturnType<typeof createTriggerStore>;
