import { z } from "zod";

/** POST /v1/dashboard/sign-in-links: a link that signs a browser in and lands on `next` (a dashboard path). */
export const SignInLinkBody = z
  .object({
    next: z.string().startsWith("/dashboard", "next must be a /dashboard path").max(2000).default("/dashboard"),
  })
  .strict();
export type SignInLinkBody = z.infer<typeof SignInLinkBody>;

/** One-time and short-lived: `{origin}/dashboard/sign-in?code=…&next=…`. */
export const SignInLink = z.object({ url: z.string() });
export type SignInLink = z.infer<typeof SignInLink>;
