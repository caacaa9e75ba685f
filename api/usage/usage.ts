import type { Usage, UsageDay, UsageQuery } from "../../protocol/usage.ts";
import { USAGE_DEFAULT_DAYS, USAGE_MAX_DAYS } from "../../protocol/usage.ts";
import { apiError } from "../errors.ts";

const DAY_MS = 86_400_000;

type Purpose = "agent" | "check";

/** A sandbox's life: from its row's creation to its stop (now, for one still live). */
export type SandboxSpan = { project_id: string; project: string; purpose: Purpose; started: Date; ended: Date };
/** A session's creation. */
export type SessionStart = { project_id: string; project: string; purpose: Purpose; created: Date };

/** The UTC days a query covers, both included: `to` defaults to `today`, `from` to USAGE_DEFAULT_DAYS before it. */
export function usageWindow(query: UsageQuery, today: Date): { from: string; to: string; start: Date; end: Date } {
  const to = query.to ?? today.toISOString().slice(0, 10);
  const end = new Date(Date.parse(`${to}T00:00:00Z`) + DAY_MS);
  const from = query.from ?? new Date(end.getTime() - USAGE_DEFAULT_DAYS * DAY_MS).toISOString().slice(0, 10);
  const start = new Date(`${from}T00:00:00Z`);
  if (end.getTime() - start.getTime() > USAGE_MAX_DAYS * DAY_MS)
    throw apiError("VALIDATION_FAILED", `from: a usage query covers at most ${USAGE_MAX_DAYS} days`, {
      field: "from",
    });
  return { from, to, start, end };
}

/**
 * Sandbox-seconds and sessions per project per UTC day within [start, end): each sandbox's life is cut at the day
 * boundaries, so a sandbox running over midnight counts on both days. Seconds are rounded per row, and the totals
 * are the rows' sums, so they add up as shown.
 */
export function usageByDay(
  window: { from: string; to: string; start: Date; end: Date },
  spans: SandboxSpan[],
  sessions: SessionStart[],
): Usage {
  const rows = new Map<string, UsageDay & { seconds: { agent: number; check: number } }>();
  const row = (day: number, project_id: string, project: string) => {
    const date = new Date(day).toISOString().slice(0, 10);
    const key = `${date} ${project_id}`;
    let found = rows.get(key);
    if (!found) {
      found = {
        date,
        project_id,
        project,
        sessions: 0,
        sandbox_seconds: 0,
        check_sessions: 0,
        check_sandbox_seconds: 0,
        seconds: { agent: 0, check: 0 },
      };
      rows.set(key, found);
    }
    return found;
  };
  const startMs = window.start.getTime();
  const endMs = window.end.getTime();
  for (const span of spans) {
    const from = Math.max(span.started.getTime(), startMs);
    const to = Math.min(span.ended.getTime(), endMs);
    for (let day = Math.floor(from / DAY_MS) * DAY_MS; day < to; day += DAY_MS) {
      const seconds = (Math.min(to, day + DAY_MS) - Math.max(from, day)) / 1000;
      row(day, span.project_id, span.project).seconds[span.purpose] += seconds;
    }
  }
  for (const session of sessions) {
    const at = session.created.getTime();
    if (at < startMs || at >= endMs) continue;
    const r = row(Math.floor(at / DAY_MS) * DAY_MS, session.project_id, session.project);
    if (session.purpose === "check") r.check_sessions += 1;
    else r.sessions += 1;
  }
  const days = [...rows.values()]
    .map(({ seconds, ...day }) => ({
      ...day,
      sandbox_seconds: Math.round(seconds.agent),
      check_sandbox_seconds: Math.round(seconds.check),
    }))
    .filter((d) => d.sessions + d.sandbox_seconds + d.check_sessions + d.check_sandbox_seconds > 0)
    .sort((a, b) => a.date.localeCompare(b.date) || a.project.localeCompare(b.project));
  const sum = (field: "sessions" | "sandbox_seconds" | "check_sessions" | "check_sandbox_seconds") =>
    days.reduce((n, d) => n + d[field], 0);
  return {
    from: window.from,
    to: window.to,
    days,
    totals: {
      sessions: sum("sessions"),
      sandbox_seconds: sum("sandbox_seconds"),
      check_sessions: sum("check_sessions"),
      check_sandbox_seconds: sum("check_sandbox_seconds"),
    },
  };
}
