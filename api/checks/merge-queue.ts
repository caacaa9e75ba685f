import type { ChangeRequest } from "../../protocol/change-request.ts";
import type { Project } from "../../protocol/project.ts";
import type { ChangeRequestService } from "../change-requests/service.ts";
import type { ChangeRequestStore } from "../change-requests/store.ts";
import { ApiError } from "../errors.ts";
import type { ReviewState } from "./review-state.ts";

export type MergeQueueDeps = {
  crStore: Pick<ChangeRequestStore, "autoMergeQueue" | "setAutoMerge">;
  changeRequests: Pick<ChangeRequestService, "record" | "merge">;
  review: ReviewState;
  projects: { byId(id: string): Promise<Project | undefined> };
  /** The audit log's entry of a merge the queue made (no request makes it: api/audit/queue-merges.ts). */
  recordMerge: (project: Project, cr: ChangeRequest) => Promise<void>;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

/**
 * Answers that mean "not yet": the checks of a head or base that just moved have not run, or a push just left its
 * approvals behind.
 */
const WAIT_CODES = new Set(["CHECKS_NOT_PASSED", "APPROVAL_REQUIRED", "HEAD_MOVED", "CONFLICT"]);

/**
 * One step of every base's merge queue. Per base only the first CR in queue order may merge: it merges once its
 * checks of the current head and base passed and nothing conflicts, as the person who queued it. Its merge moves
 * the base, so the next CR's checks run again on the base it will land on: two CRs green alone never merge into a
 * red base together. A conflict or a failed check takes a CR out of the queue with the reason; the next one goes.
 * A CR short of approvals stays queued without holding its base: people approve when they do, and the CRs behind it
 * merge meanwhile.
 */
export async function advanceMergeQueue(deps: MergeQueueDeps): Promise<void> {
  const busy = new Set<string>();
  for (const entry of await deps.crStore.autoMergeQueue()) {
    const key = `${entry.project_id}\0${entry.base_ref}`;
    if (busy.has(key)) continue;
    const project = await deps.projects.byId(entry.project_id);
    if (!project) continue;
    const cr = await deps.changeRequests.record(project, entry.cr_id);
    const [shown] = await deps.review.present(project, [cr]);
    if (shown?.status !== "open") continue;
    const out = async (note: string) => {
      await deps.crStore.setAutoMerge(cr.cr_id, { note });
      deps.log("a CR left the merge queue", { cr: cr.cr_id, number: cr.number, note });
    };
    if (shown.checks_status === "failed") {
      const failed = (await deps.review.current(project, cr)).filter(
        (r) => r.status === "failed" || r.status === "error",
      );
      await out(
        `check ${failed.map((r) => `'${r.name}'`).join(", ") || "run"} failed on ${cr.head_commit_sha?.slice(0, 12)}`,
      );
      continue;
    }
    if (shown.approvals < shown.required_approvals) continue;
    busy.add(key);
    if (shown.checks_status === "pending") continue;
    if (!shown.mergeable) {
      await out(`conflicts with '${cr.base_ref}'; resolve it (svc cr resolve ${cr.number}) and queue it again`);
      busy.delete(key);
      continue;
    }
    try {
      const merged = await deps.changeRequests.merge(project, cr.cr_id, entry.auto_merge_by);
      await deps
        .recordMerge(project, merged)
        .catch((err: Error) =>
          deps.log("could not record a queued merge in the audit log", { cr: cr.cr_id, error: err.message }),
        );
    } catch (err) {
      if (err instanceof ApiError && WAIT_CODES.has(err.code)) continue;
      await out(`the merge failed: ${(err as Error).message}`);
      busy.delete(key);
    }
  }
}
