import type { Usage, UsageQuery } from "../../protocol/usage.ts";
import type { Sql } from "../db/sql.ts";
import { type SandboxSpan, type SessionStart, usageByDay, usageWindow } from "./usage.ts";

/** An account's usage, read from its sessions' own rows: sandboxes' lives and sessions' creations. */
export function createUsageStore(sql: Sql) {
  return {
    async usage(accountId: string, query: UsageQuery, today = new Date()): Promise<Usage> {
      const window = usageWindow(query, today);
      // A sandbox that ended before stopped_at was recorded (0026) last changed when it ended.
      const spans = await sql.query<SandboxSpan>(
        `select s.project_id, p.slug as project, s.purpose, b.created_at as started, e.ended
         from project_sessions s join session_sandboxes b using (session_id) join projects p on p.id = s.project_id,
           lateral (select coalesce(b.stopped_at,
             case when b.status in ('provisioning', 'active') then now() else b.updated_at end) as ended) e
         where s.account_id = $1 and b.created_at < $3 and e.ended > $2`,
        [accountId, window.start.toISOString(), window.end.toISOString()],
      );
      const sessions = await sql.query<SessionStart>(
        `select s.project_id, p.slug as project, s.purpose, s.created_at as created
         from project_sessions s join projects p on p.id = s.project_id
         where s.account_id = $1 and s.created_at >= $2 and s.created_at < $3`,
        [accountId, window.start.toISOString(), window.end.toISOString()],
      );
      return usageByDay(
        window,
        spans.map((r) => ({ ...r, started: new Date(r.started), ended: new Date(r.ended) })),
        sessions.map((r) => ({ ...r, created: new Date(r.created) })),
      );
    },
  };
}

export type UsageStore = ReturnType<typeof createUsageStore>;
