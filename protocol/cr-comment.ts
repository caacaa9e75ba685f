import { z } from "zod";
import { SafeName, SafeText } from "./text.ts";

/** A review note, or `svc cr resolve`'s request that the agent merge the base and resolve the conflicts. */
export const CrCommentKind = z.enum(["comment", "resolve"]);
export type CrCommentKind = z.infer<typeof CrCommentKind>;

/** Where a comment sent to the agent stands: on its way, taken by the agent, or refused on the way (see the error). */
export const CrCommentDelivery = z.enum(["pending", "delivered", "failed"]);
export type CrCommentDelivery = z.infer<typeof CrCommentDelivery>;

/** `POST`/`GET /v1/projects/{id}/change-requests/{n}/comments`: one comment on a CR. */
export const CrComment = z.object({
  id: z.uuid(),
  cr_id: z.uuid(),
  kind: CrCommentKind,
  /** The person's email; `session <id>` when a session's own token (its agent) wrote it. */
  author: z.string(),
  /** The session whose token wrote it (its agent answering on its own CR); null for a person. */
  author_session_id: z.string().nullable(),
  body: z.string(),
  /** The file of the CR's diff it is about (new side), and the line there; null for a general comment. */
  path: z.string().nullable(),
  line: z.number().int().positive().nullable(),
  /** The CR's head when the comment was made: its path and line are that commit's. */
  head_sha: z.string().nullable(),
  to_agent: z.boolean(),
  /** The session that took it as a prompt (the CR's agent, restarted or new); null unless `to_agent`. */
  session_id: z.string().nullable(),
  delivery: CrCommentDelivery.nullable(),
  delivery_error: z.string().nullable(),
  created_at: z.string(),
});
export type CrComment = z.infer<typeof CrComment>;

export const CrCommentList = z.array(CrComment);
export type CrCommentList = z.infer<typeof CrCommentList>;

export const CreateCrCommentBody = z
  .object({
    body: SafeText.trim().min(1, "must not be empty").max(65_536),
    path: SafeName.min(1).max(4096).optional(),
    line: z.number().int().positive().max(10_000_000).optional(),
    /** Send it to the CR's agent as a prompt: its commits land on the head branch, so the same CR updates. */
    to_agent: z.boolean().optional(),
  })
  .strict()
  .refine((b) => b.line === undefined || b.path !== undefined, {
    message: "a line is a line of a file: give path with it",
    path: ["line"],
  });
export type CreateCrCommentBody = z.infer<typeof CreateCrCommentBody>;
