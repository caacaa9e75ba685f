import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";

/**
 * `X-Svc-User-Context`: `<base64url(JSON payload)>.<base64url(HMAC-SHA256(SVC_TOKEN, first part))>`.
 * The signing and checking live here, beside the schema, because they *are* the wire format that the
 * API (signer) and the daemon (checker) must agree on byte for byte.
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

export type UserContextCheck =
  | { ok: true; context: UserContext }
  | { ok: false; reason: "malformed" | "bad_signature" | "expired" };

function mac(key: string, data: string): Buffer {
  return createHmac("sha256", key).update(data).digest();
}

export function signUserContext(key: string, context: Omit<UserContext, "v">): string {
  const payload = Buffer.from(JSON.stringify({ v: 1, ...context })).toString("base64url");
  return `${payload}.${mac(key, payload).toString("base64url")}`;
}

export function verifyUserContext(
  key: string,
  header: string | undefined,
  nowSeconds = Date.now() / 1000,
): UserContextCheck {
  if (!header) return { ok: false, reason: "malformed" };
  const dot = header.indexOf(".");
  if (dot <= 0 || dot !== header.lastIndexOf(".")) return { ok: false, reason: "malformed" };
  const payload = header.slice(0, dot);
  const given = Buffer.from(header.slice(dot + 1), "base64url");
  const expected = mac(key, payload);
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { ok: false, reason: "bad_signature" };
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    return { ok: false, reason: "malformed" };
  }
  const context = UserContext.safeParse(parsed);
  if (!context.success) return { ok: false, reason: "malformed" };
  if (context.data.exp <= nowSeconds) return { ok: false, reason: "expired" };
  return { ok: true, context: context.data };
}
