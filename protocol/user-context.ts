import { z } from "zod";
import { type SignedCheck, signToken, verifyToken } from "./signed-token.ts";

/**
 * `X-Svc-User-Context`: a signed token (signed-token.ts) keyed by the sandbox's SVC_TOKEN. The API signs one per
 * forwarded request; the daemon checks it. Both sides use these two functions, so they agree byte for byte.
 */
export const USER_CONTEXT_HEADER = "x-svc-user-context";

export const UserContext = z.object({
  v: z.literal(1),
  user_id: z.string().min(1),
  project_id: z.string().min(1),
  session_id: z.string().min(1),
  /** Expiry, unix seconds. */
  exp: z.number().int().positive(),
});
export type UserContext = z.infer<typeof UserContext>;

export function signUserContext(key: string, context: Omit<UserContext, "v">): string {
  return signToken(key, { v: 1, ...context });
}

export function verifyUserContext(
  key: string,
  header: string | undefined,
  nowSeconds = Date.now() / 1000,
): SignedCheck<UserContext> {
  return verifyToken(key, UserContext, header, nowSeconds);
}
