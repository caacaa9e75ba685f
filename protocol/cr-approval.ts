import { z } from "zod";
import { CommitSha } from "./change-request.ts";

/**
 * `POST`/`GET /v1/projects/{id}/change-requests/{n}/approve(als)`: one person's approval of one head of a CR. A push
 * to the head leaves it behind: it stays listed, and no longer counts.
 */
export const CrApproval = z.object({
  /** The person's email. */
  user: z.string(),
  user_id: z.uuid(),
  /** The head approved: the approval counts only while the CR's head is this commit. */
  head_sha: z.string(),
  /**
   * Counts toward `[review] required_approvals`: it approved the CR's current head, and its person is still a member
   * of the project's account who may approve.
   */
  counted: z.boolean(),
  created_at: z.string(),
});
export type CrApproval = z.infer<typeof CrApproval>;

/** Every approval of the CR, of its earlier heads too, oldest first. */
export const CrApprovalList = z.array(CrApproval);
export type CrApprovalList = z.infer<typeof CrApprovalList>;

export const ApproveChangeRequestBody = z
  .object({
    /** The head the person reviewed: when the branch moved since, nothing is approved (409 HEAD_MOVED). */
    head_sha: CommitSha.optional(),
  })
  .strict();
export type ApproveChangeRequestBody = z.infer<typeof ApproveChangeRequestBody>;
