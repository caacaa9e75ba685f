import { z } from "zod";
import { ChecksStatus } from "./cr-check.ts";
import { BranchName } from "./project.ts";
import { Metadata, SafeName, SafeText } from "./text.ts";

export const ChangeRequestStatus = z.enum(["open", "merged", "closed"]);
export type ChangeRequestStatus = z.infer<typeof ChangeRequestStatus>;

/** A CR as stored: what it is, without the review state read from its checks and branches. */
export const ChangeRequestRecord = z.object({
  cr_id: z.uuid(),
  account_id: z.uuid(),
  project_id: z.uuid(),
  number: z.number().int().positive(),
  title: z.string().min(1),
  description: z.string(),
  base_ref: z.string(),
  head_ref: z.string(),
  status: ChangeRequestStatus,
  head_commit_sha: z.string().nullable(),
  base_commit_sha: z.string().nullable(),
  origin_session_id: z.string().nullable(),
  created_by: z.uuid(),
  merged_at: z.string().nullable(),
  merged_by: z.uuid().nullable(),
  merge_commit_sha: z.string().nullable(),
  closed_at: z.string().nullable(),
  closed_by: z.uuid().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  /** Waiting in its base's merge queue: merged as soon as its checks pass and nothing conflicts. */
  auto_merge: z.boolean(),
  /** Why the merge queue last let it go (a conflict, a failed check); null while queued or never queued. */
  auto_merge_note: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ChangeRequestRecord = z.infer<typeof ChangeRequestRecord>;

/**
 * A CR as the API shows it: the record, its checks of the current head and base, its approvals, and whether it
 * merges now.
 */
export const ChangeRequest = ChangeRequestRecord.extend({
  checks_status: ChecksStatus,
  /** Approvals of its current head that count (`GET …/approvals` lists them, earlier heads' too). */
  approvals: z.number().int().nonnegative(),
  /** `[review] required_approvals` of the default branch's svc.toml: how many it needs to merge. */
  required_approvals: z.number().int().nonnegative(),
  /**
   * Open, free of conflicts, with every check of its current head and base passed and its approvals given: Merge
   * would land it.
   */
  mergeable: z.boolean(),
});
export type ChangeRequest = z.infer<typeof ChangeRequest>;

export const ChangeRequestEnvelope = z.object({ change_request: ChangeRequest });
export type ChangeRequestEnvelope = z.infer<typeof ChangeRequestEnvelope>;

export const ChangeRequestList = z.object({ change_requests: z.array(ChangeRequest) });
export type ChangeRequestList = z.infer<typeof ChangeRequestList>;

export const ListChangeRequestsQuery = z
  .object({ status: z.enum(["open", "merged", "closed", "all"]).default("all") })
  .strict();
export type ListChangeRequestsQuery = z.infer<typeof ListChangeRequestsQuery>;

export const CreateChangeRequestBody = z
  .object({
    title: SafeName.trim().min(1, "title must not be empty").max(500),
    description: SafeText.max(100_000).optional(),
    head_ref: BranchName,
    base_ref: BranchName.optional(),
    session_id: SafeName.max(200).optional(),
    metadata: Metadata.optional(),
  })
  .strict();
export type CreateChangeRequestBody = z.infer<typeof CreateChangeRequestBody>;

export const UpdateChangeRequestBody = z
  .object({
    title: SafeName.trim().min(1, "title must not be empty").max(500).optional(),
    description: SafeText.max(100_000).optional(),
  })
  .strict()
  .refine((b) => b.title !== undefined || b.description !== undefined, "give title and/or description");
export type UpdateChangeRequestBody = z.infer<typeof UpdateChangeRequestBody>;

export const CommitSha = z.string().regex(/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/, "a full commit id (40 or 64 hex digits)");

export const MergeChangeRequestBody = z
  .object({
    message: SafeText.trim().min(1).max(10_000).optional(),
    /** The head the person reviewed: when the branch moved since, the merge is refused (409 HEAD_MOVED). */
    head_sha: CommitSha.optional(),
    /** Queue the CR to merge by itself once its checks pass (202); `false` takes it out of the queue. */
    auto: z.boolean().optional(),
  })
  .strict()
  .refine((b) => b.auto === undefined || (b.message === undefined && b.head_sha === undefined), {
    message: "auto merges whatever head passes its checks: give it without message and head_sha",
  });
export type MergeChangeRequestBody = z.infer<typeof MergeChangeRequestBody>;

export const MergePreview = z.object({
  base_sha: z.string(),
  head_sha: z.string(),
  merge_base: z.string().nullable(),
  is_up_to_date: z.boolean(),
  can_merge: z.boolean(),
  can_fast_forward: z.boolean(),
  conflicts: z.array(z.string()),
});
export type MergePreview = z.infer<typeof MergePreview>;

export const DiffFileStatus = z.enum(["added", "modified", "deleted"]);
export type DiffFileStatus = z.infer<typeof DiffFileStatus>;

export const DiffFile = z.object({
  path: z.string(),
  /** Set when git detected a rename; the file is then reported as `modified` under its new path. */
  old_path: z.string().nullable(),
  status: DiffFileStatus,
  additions: z.number().int().nonnegative(),
  deletions: z.number().int().nonnegative(),
  binary: z.boolean(),
});
export type DiffFile = z.infer<typeof DiffFile>;

export const Diff = z.object({
  base_sha: z.string(),
  head_sha: z.string(),
  patch: z.string(),
  files: z.array(DiffFile),
});
export type Diff = z.infer<typeof Diff>;
