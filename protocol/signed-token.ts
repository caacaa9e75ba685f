import { createHmac, timingSafeEqual } from "node:crypto";
import type { z } from "zod";

/**
 * `<base64url(JSON payload)>.<base64url(HMAC-SHA256(key, first part))>`: the wire format of the signed values
 * the API hands out and checks (user contexts for the daemon, preview links). Every payload carries `exp`.
 */
export type SignedCheck<T> = { ok: true; value: T } | { ok: false; reason: "malformed" | "bad_signature" | "expired" };

function mac(key: string, data: string): Buffer {
  return createHmac("sha256", key).update(data).digest();
}

export function signToken<T extends { exp: number }>(key: string, payload: T): string {
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${body}.${mac(key, body).toString("base64url")}`;
}

export function verifyToken<S extends z.ZodType<{ exp: number }>>(
  key: string,
  schema: S,
  token: string | undefined,
  nowSeconds = Date.now() / 1000,
): SignedCheck<z.infer<S>> {
  if (!token) return { ok: false, reason: "malformed" };
  const dot = token.indexOf(".");
  if (dot <= 0 || dot !== token.lastIndexOf(".")) return { ok: false, reason: "malformed" };
  const body = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1), "base64url");
  const expected = mac(key, body);
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { ok: false, reason: "bad_signature" };
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    return { ok: false, reason: "malformed" };
  }
  const value = schema.safeParse(parsed);
  if (!value.success) return { ok: false, reason: "malformed" };
  if (value.data.exp <= nowSeconds) return { ok: false, reason: "expired" };
  return { ok: true, value: value.data };
}
