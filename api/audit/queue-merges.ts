import type { ChangeRequest } from "../../protocol/change-request.ts";
import type { Project } from "../../protocol/project.ts";
import type { AuditLog } from "./store.ts";

/**
 * The merge queue's merges (api/checks/merge-queue.ts): no request makes them, so the hook never sees them. Each is
 * the act of the person who queued the CR, who is its `merged_by`; `via` says the queue did it for them.
 */
export function recordQueueMerge(audit: AuditLog) {
  return async (project: Project, cr: Pick<ChangeRequest, "number" | "merged_by">): Promise<void> => {
    if (!cr.merged_by) return;
    await audit.record({
      accountIds: [project.account_id],
      actor: { userId: cr.merged_by, kind: "user" },
      action: "cr.merge",
      resource: { type: "change_request", id: String(cr.number) },
      projectId: project.id,
      requestId: null,
      clientAddress: null,
      status: null,
      details: { via: "merge_queue" },
    });
  };
}
