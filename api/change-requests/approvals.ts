import type { CrApproval } from "../../protocol/cr-approval.ts";
import type { Project } from "../../protocol/project.ts";
import { apiError } from "../errors.ts";
import type { Events } from "../events.ts";
import type { ApprovalStore } from "./approvals-store.ts";
import type { ChangeRequestService } from "./service.ts";

export type ApprovalServiceDeps = {
  changeRequests: Pick<ChangeRequestService, "record">;
  store: ApprovalStore;
  /** `change-request.changed` (`approved`): the merge queue looks at once at a CR that may now merge. */
  events: Events;
};

/**
 * Approvals of a CR (DESIGN "Teams": `[review] required_approvals`): a person other than the CR's author approves its
 * current head; a push to the head leaves that approval behind. The merge gate counts them (api/checks/review-state.ts).
 */
export function createApprovalService(deps: ApprovalServiceDeps) {
  const crs = deps.changeRequests;
  return {
    /** Every approval of the CR, earlier heads' too, each saying whether it counts. */
    async list(project: Project, ref: string): Promise<CrApproval[]> {
      return deps.store.list(await crs.record(project, ref));
    },

    /**
     * `userId` approves the CR's head as it is now, or exactly `headSha` (the head the person reviewed) or nothing.
     * The caller has made sure `userId` is a person acting, never a session's agent.
     */
    async approve(project: Project, ref: string, userId: string, headSha?: string) {
      const cr = await crs.record(project, ref);
      if (cr.status !== "open")
        throw apiError("CR_NOT_OPEN", `CR #${cr.number} is ${cr.status}; only an open CR is approved`);
      // A CR a session opened has the session's person as its author: their agent's work needs someone else's review.
      if (cr.created_by === userId)
        throw apiError(
          "SELF_APPROVAL",
          `you opened CR #${cr.number} (yourself or through your session): its approvals come from other members`,
        );
      const head = cr.head_commit_sha;
      if (!head) throw apiError("BRANCH_NOT_FOUND", `CR #${cr.number}'s head branch '${cr.head_ref}' has no commit`);
      if (headSha && headSha !== head)
        throw apiError(
          "HEAD_MOVED",
          `the head of CR #${cr.number} moved to ${head.slice(0, 12)} since you saw ${headSha.slice(0, 12)}: ` +
            `review it again (svc cr show ${cr.number}) before approving`,
          { head_sha: head },
        );
      const approved = await deps.store.approve(cr, userId, head);
      if (approved.created) deps.events.emit("change-request.changed", { project, cr, change: "approved" });
      return approved;
    },
  };
}

export type ApprovalService = ReturnType<typeof createApprovalService>;
