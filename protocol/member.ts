import { z } from "zod";
import { AccountRole } from "./account.ts";
import { SafeName } from "./text.ts";

/** An email as svc keeps it: trimmed and lower-cased, so `Ann@X.test` and `ann@x.test` are one person. */
export const Email = z.string().trim().toLowerCase().max(254).pipe(z.email("must be an email address"));
export type Email = z.infer<typeof Email>;

/** A person's display name. */
export const DisplayName = SafeName.trim().min(1).max(200);

/**
 * A password as a person chooses it: long enough to resist guessing at the rate sign-in allows, short enough that
 * hashing it costs nothing extra. Never trimmed: every character counts.
 */
export const NewPassword = z
  .string()
  .min(8, "must have at least 8 characters")
  .max(1024, "must have at most 1024 characters");

/** A password as typed at sign-in: checked against the stored hash, never against the rules of a new one. */
export const Password = z.string().min(1).max(1024);

/** One member of an account, as `GET /v1/accounts/members` lists them. Never a password or its hash. */
export const Member = z.object({
  email: z.string(),
  name: z.string(),
  role: AccountRole,
  /** When the membership began. */
  joined: z.string(),
});
export type Member = z.infer<typeof Member>;

export const MemberList = z.object({ members: z.array(Member) });
export type MemberList = z.infer<typeof MemberList>;

/**
 * `POST /v1/accounts/members/invites`. `account_id`, here and in RoleChangeBody: the account to act on, as on every
 * account route (api/auth/authenticate.ts reads it), else the caller's active one.
 */
export const InviteBody = z
  .object({ email: Email, role: AccountRole.default("member"), account_id: z.uuid().optional() })
  .strict();
export type InviteBody = z.infer<typeof InviteBody>;

/** The answer to an invite: the one-time URL is in this answer only (the token is stored hashed). */
export const Invite = z.object({
  email: z.string(),
  role: AccountRole,
  account: z.string(),
  url: z.string(),
  expires_at: z.string(),
});
export type Invite = z.infer<typeof Invite>;

/** `PATCH /v1/accounts/members/{email}`. */
export const RoleChangeBody = z.object({ role: AccountRole, account_id: z.uuid().optional() }).strict();
export type RoleChangeBody = z.infer<typeof RoleChangeBody>;

/** `POST /v1/auth/password`: `svc login --email`, a user token for a person's email and password. */
export const PasswordLoginBody = z.object({ email: Email, password: Password }).strict();
export type PasswordLoginBody = z.infer<typeof PasswordLoginBody>;
