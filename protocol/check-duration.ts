import type { CheckRun } from "./cr-check.ts";

const pad = (n: number) => String(n).padStart(2, "0");

/**
 * How long a check ran, or has been running at `now`, as `svc cr checks` and the CR page both show it: `4s`,
 * `2m05s`, `1h02m`; `-` while it waits in the queue.
 */
export function checkDuration(run: Pick<CheckRun, "started_at" | "finished_at">, now = Date.now()): string {
  if (!run.started_at) return "-";
  const end = run.finished_at ? Date.parse(run.finished_at) : now;
  const s = Math.max(0, Math.round((end - Date.parse(run.started_at)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
}
