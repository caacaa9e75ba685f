import { z } from "zod";

/** Who acted: a person (their login, or the dashboard), a project token a person minted, or a session's sandbox. */
export const AuditActorKind = z.enum(["user", "project_token", "sandbox"]);
export type AuditActorKind = z.infer<typeof AuditActorKind>;

/**
 * One entry of an account's audit log (`GET /v1/accounts/audit`). `details` holds names only (secret names, the
 * fields a request set, a role's name, `via` for a merge the queue made), never a value.
 */
export const AuditEvent = z.object({
  /** Increasing with every entry: the cursor of `?before=`. */
  id: z.number().int().positive(),
  at: z.string(),
  actor: z.object({
    user_id: z.uuid(),
    /** The actor's email when the entry was written. */
    email: z.string().nullable(),
    kind: AuditActorKind,
  }),
  /** `<resource>.<verb>`: `cr.merge`, `token.mint`, `secrets.set`, `member.invite`, … */
  action: z.string(),
  resource: z.object({ type: z.string(), id: z.string().nullable() }),
  project_id: z.uuid().nullable(),
  request_id: z.string().nullable(),
  client_address: z.string().nullable(),
  /** The HTTP status the act was answered with; null for acts no request made (the merge queue's merges). */
  status: z.number().int().nullable(),
  details: z.record(z.string(), z.union([z.string(), z.array(z.string())])),
});
export type AuditEvent = z.infer<typeof AuditEvent>;

/** Newest first; `next_before`: the `before` of the next (older) page, null when this one is the last. */
export const AuditList = z.object({ events: z.array(AuditEvent), next_before: z.number().int().nullable() });
export type AuditList = z.infer<typeof AuditList>;

export const AUDIT_PAGE_DEFAULT = 50;
export const AUDIT_PAGE_MAX = 500;

/** `GET /v1/accounts/audit?limit=&before=`. */
export const AuditQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(AUDIT_PAGE_MAX).default(AUDIT_PAGE_DEFAULT),
    /** Entries older than this id (an earlier answer's `next_before`). */
    before: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .strict();
export type AuditQuery = z.infer<typeof AuditQuery>;
