import { z } from "zod";

export const User = z.object({
  id: z.uuid(),
  email: z.string(),
  name: z.string(),
});
export type User = z.infer<typeof User>;

export const Account = z.object({
  id: z.uuid(),
  name: z.string(),
  slug: z.string(),
  role: z.enum(["owner", "admin", "member"]),
});
export type Account = z.infer<typeof Account>;

export const Me = z.object({
  user: User,
  account: Account,
  accounts: z.array(Account),
});
export type Me = z.infer<typeof Me>;
