import type { CheckRun, CheckSpec, CheckStatus } from "../../protocol/cr-check.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

/** A run as the scheduler works with it: the shown fields and what it needs to run and own it. */
export type StoredRun = CheckRun & {
  run_id: string;
  cr_id: string;
  project_id: string;
  run: string;
  timeout_s: number;
  session_id: string | null;
  instance_id: string | null;
};

type Row = Omit<StoredRun, "started_at" | "finished_at"> & { started_at: Date | null; finished_at: Date | null };

const COLUMNS = `run_id, cr_id, project_id, name, run, timeout_s, head_sha, base_sha, commit_sha, status, exit_code,
  log, session_id, instance_id, started_at, finished_at`;

const toRun = (r: Row): StoredRun => ({ ...r, started_at: iso(r.started_at), finished_at: iso(r.finished_at) });

/** What the API shows of a run: never its command, session or owner. */
export const shownRun = (r: StoredRun): CheckRun => ({
  name: r.name,
  status: r.status,
  head_sha: r.head_sha,
  base_sha: r.base_sha,
  commit_sha: r.commit_sha,
  exit_code: r.exit_code,
  started_at: r.started_at,
  finished_at: r.finished_at,
  log: r.log,
});

/** Check runs: one per (check, head, base) of a CR, queued once and run once. */
export function createCheckStore(sql: Sql) {
  return {
    /** Queues each check for the CR's (head, base); one already there (any status) stays as it is. */
    async enqueue(
      cr: { cr_id: string; project_id: string },
      head: string,
      base: string,
      checks: readonly CheckSpec[],
    ): Promise<number> {
      let added = 0;
      for (const check of checks) {
        const rows = await sql.query(
          `insert into cr_check_runs (cr_id, project_id, name, run, timeout_s, head_sha, base_sha)
           values ($1, $2, $3, $4, $5, $6, $7) on conflict (cr_id, name, head_sha, base_sha) do nothing returning 1`,
          [cr.cr_id, cr.project_id, check.name, check.run, check.timeout, head, base],
        );
        added += rows.length;
      }
      return added;
    },

    /** Queued runs of a CR's older heads and bases: they would check what can no longer merge. */
    dropSuperseded: (crId: string, head: string, base: string) =>
      sql.query(
        "delete from cr_check_runs where cr_id = $1 and status = 'queued' and (head_sha <> $2 or base_sha <> $3)",
        [crId, head, base],
      ),

    /** The runs of CRs' (head, base) pairs, for showing them or summing them up. */
    async forHeads(pairs: readonly { crId: string; head: string; base: string }[]): Promise<StoredRun[]> {
      if (pairs.length === 0) return [];
      const rows = await sql.query<Row>(
        `select ${COLUMNS} from cr_check_runs
         where cr_id = any($1::uuid[]) and (cr_id::text || ':' || head_sha || ':' || base_sha) = any($2::text[])
         order by created_at, name`,
        [pairs.map((p) => p.crId), pairs.map((p) => `${p.crId}:${p.head}:${p.base}`)],
      );
      return rows.map(toRun);
    },

    /**
     * Takes the oldest queued run for this process (`instanceId`), with the commit it runs on; undefined when none
     * is queued. One taker wins each run, whatever the number of processes.
     */
    async take(instanceId: string): Promise<StoredRun | undefined> {
      const [row] = await sql.query<Row>(
        `update cr_check_runs set status = 'running', instance_id = $1, started_at = now(), log = ''
         where run_id = (select run_id from cr_check_runs where status = 'queued' order by created_at limit 1
                         for update skip locked)
         returning ${COLUMNS}`,
        [instanceId],
      );
      return row && toRun(row);
    },

    /** A run that could not start after all (no room under the session cap) waits in the queue again. */
    requeue: (runId: string) =>
      sql.query(
        "update cr_check_runs set status = 'queued', instance_id = null, session_id = null, started_at = null where run_id = $1 and status = 'running'",
        [runId],
      ),

    setRunning: (runId: string, fields: { sessionId?: string; commitSha?: string }) =>
      sql.query(
        `update cr_check_runs set session_id = coalesce($2, session_id), commit_sha = coalesce($3, commit_sha)
         where run_id = $1`,
        [runId, fields.sessionId ?? null, fields.commitSha ?? null],
      ),

    /** The log as far as it got, while the check runs (what the dashboard follows). */
    setLog: (runId: string, log: string) =>
      sql.query("update cr_check_runs set log = $2 where run_id = $1 and status = 'running'", [runId, log]),

    async finish(
      runId: string,
      result: { status: Extract<CheckStatus, "passed" | "failed" | "error">; exitCode: number | null; log: string },
    ): Promise<StoredRun | undefined> {
      const [row] = await sql.query<Row>(
        `update cr_check_runs set status = $2, exit_code = $3, log = $4, finished_at = now()
         where run_id = $1 and status = 'running' returning ${COLUMNS}`,
        [runId, result.status, result.exitCode, result.log],
      );
      return row && toRun(row);
    },

    /** Runs a process took and no longer runs: its `isAlive` says it is gone. */
    async orphaned(isAlive: (instanceId: string) => Promise<boolean>, self: string): Promise<StoredRun[]> {
      const rows = await sql.query<Row>(`select ${COLUMNS} from cr_check_runs where status = 'running'`);
      const runs = rows.map(toRun);
      const dead: StoredRun[] = [];
      for (const run of runs) {
        if (run.instance_id && run.instance_id !== self && !(await isAlive(run.instance_id))) dead.push(run);
      }
      return dead;
    },
  };
}

export type CheckStore = ReturnType<typeof createCheckStore>;
