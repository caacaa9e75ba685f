import { expect } from "vitest";
import { createCheckStore, type StoredRun } from "../../api/checks/store.ts";
import type { Sql } from "../../api/db/sql.ts";
import { ChangeRequest } from "../../protocol/change-request.ts";
import { CheckSpec } from "../../protocol/cr-check.ts";
import { call } from "./api-server.ts";

/** The [[checks]] a test project's default branch names, and the same as the scheduler reads them. */
export const CHECKS_MANIFEST = `[[checks]]
name = "unit"
run = "npm test"

[[checks]]
name = "lint"
run = "npm run lint"
`;
const SPECS = [
  CheckSpec.parse({ name: "unit", run: "npm test" }),
  CheckSpec.parse({ name: "lint", run: "npm run lint" }),
];

/**
 * Check runs written through the scheduler's own store (queued, taken, finished) on an API that runs no scheduler:
 * what `svc cr checks` and the CR page show, without a sandbox running anything.
 */
export function seededChecks(sql: Sql, apiUrl: string, token: string, projectId: string) {
  const store = createCheckStore(sql);
  const crOf = async (n: number) =>
    ChangeRequest.parse(
      (await call(apiUrl, "GET", `/v1/projects/${projectId}/change-requests/${n}`, { token })).body.change_request,
    );

  return {
    crOf,

    /** Queues `names` for CR `n`'s current head and base, as the scheduler does when a head is pushed. */
    async queue(n: number, ...names: ("unit" | "lint")[]) {
      const cr = await crOf(n);
      const added = await store.enqueue(
        cr,
        cr.head_commit_sha!,
        cr.base_commit_sha!,
        SPECS.filter((s) => names.includes(s.name as "unit")),
      );
      expect(added).toBe(names.length);
    },

    /** Takes every queued run, as a check runner would: each is `running` from now. */
    async start(): Promise<Record<string, StoredRun>> {
      const taken: Record<string, StoredRun> = {};
      for (let run = await store.take("test-runner"); run; run = await store.take("test-runner")) taken[run.name] = run;
      return taken;
    },

    setLog: (run: StoredRun, log: string) => store.setLog(run.run_id, log),

    /** Finishes a running run; `seconds`: how long it ran, as its duration shows. */
    async finish(
      run: StoredRun,
      status: "passed" | "failed" | "error",
      exitCode: number | null,
      log: string,
      seconds = 0,
    ) {
      expect(await store.finish(run.run_id, { status, exitCode, log })).toBeDefined();
      await sql.query(
        "update cr_check_runs set started_at = finished_at - make_interval(secs => $2) where run_id = $1",
        [run.run_id, seconds],
      );
    },
  };
}
