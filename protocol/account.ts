import { z } from "zod";

export const User = z.object({
  id: z.uuid(),
  email: z.string(),
  name: z.string(),
});
export type User = z.infer<typeof User>;

/** A member's role in an account, each a superset of the one after it: owner > admin > member > viewer. */
export const AccountRole = z.enum(["owner", "admin", "member", "viewer"]);
export type AccountRole = z.infer<typeof AccountRole>;

/**
 * The request header naming, by slug or id, the account a person's account routes act on (`svc accounts use`);
 * without it, their first account. Project routes act on the project's account whatever it says.
 */
export const ACCOUNT_HEADER = "x-svc-account";

export const Account = z.object({
  id: z.uuid(),
  name: z.string(),
  slug: z.string(),
  role: AccountRole,
});
export type Account = z.infer<typeof Account>;

export const Me = z.object({
  user: User,
  account: Account,
  accounts: z.array(Account),
});
export type Me = z.infer<typeof Me>;
