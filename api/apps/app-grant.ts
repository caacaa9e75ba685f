import { createHmac } from "node:crypto";
import { z } from "zod";
import { type SignedCheck, signToken, verifyToken } from "../../protocol/signed-token.ts";

/**
 * App links: `svc apps open` asks for a URL a browser can use without an Authorization header. The grant rides in
 * `?svc_app=` on the first visit and in a cookie of the app's own origin after that; it names one user, project
 * and app. Its key is derived from the server's secrets key, so every API replica checks it and rotating that
 * key voids all links.
 */
export const APP_PARAM = "svc_app";
export const APP_COOKIE = "svc_app";
export const APP_LINK_TTL_S = 12 * 3600;

export const AppGrant = z.object({
  v: z.literal(1),
  kind: z.literal("app"),
  user_id: z.string().min(1),
  project_id: z.string().min(1),
  app: z.string().min(1),
  exp: z.number().int().positive(),
});
export type AppGrant = z.infer<typeof AppGrant>;

/** The signing key for app grants, from the server's secrets key. */
export const appGrantKey = (secretsKey: string) =>
  createHmac("sha256", secretsKey).update("svc app link").digest("hex");

export function signAppGrant(key: string, grant: Omit<AppGrant, "v" | "kind">): string {
  return signToken(key, { v: 1, kind: "app", ...grant });
}

export function verifyAppGrant(key: string, token: string | undefined): SignedCheck<AppGrant> {
  return verifyToken(key, AppGrant, token);
}
