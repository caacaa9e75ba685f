import { createHmac } from "node:crypto";
import { z } from "zod";
import { DEFAULT_PREVIEW_PORT } from "./env.ts";
import { type SignedCheck, signToken, verifyToken } from "./signed-token.ts";

/**
 * Preview links: `svc sessions preview` asks the API for a URL that works without an Authorization header (a
 * browser, curl). The URL carries a grant in `?svc_preview=`; the API checks it, remembers it in a cookie
 * scoped to the preview path, and forwards as the user it names. Grants are signed with a key derived from
 * the sandbox's service key, so a restarted sandbox voids its links and a grant is never a daemon credential.
 */
export const PREVIEW_PARAM = "svc_preview";
export const PREVIEW_COOKIE = "svc_preview";
export const PREVIEW_LINK_TTL_S = 3600;

export const PreviewPort = z.coerce.number().int().min(1).max(65535);

/** In a JSON body the port is a number: `"3000"` or `true` is a wrong type there, not something to coerce. */
export const CreatePreviewBody = z.object({ port: z.int().min(1).max(65535).default(DEFAULT_PREVIEW_PORT) }).strict();
export type CreatePreviewBody = z.infer<typeof CreatePreviewBody>;

export const PreviewLink = z.object({
  /** Under the API's own origin: works with any HTTP client. */
  url: z.string(),
  /** At the root of its own origin (`<port>-<session>.<preview domain>`), so an app's root-relative asset
   * paths resolve in a browser; null when the server has no preview domain. */
  browser_url: z.string().nullable(),
  port: z.number().int(),
  expires_at: z.string(),
});
export type PreviewLink = z.infer<typeof PreviewLink>;

export const PreviewGrant = z.object({
  v: z.literal(1),
  kind: z.literal("preview"),
  user_id: z.string().min(1),
  project_id: z.string().min(1),
  session_id: z.string().min(1),
  port: z.number().int(),
  exp: z.number().int().positive(),
});
export type PreviewGrant = z.infer<typeof PreviewGrant>;

const grantKey = (serviceKey: string) => createHmac("sha256", serviceKey).update("svc preview link").digest("hex");

export function signPreviewGrant(serviceKey: string, grant: Omit<PreviewGrant, "v" | "kind">): string {
  return signToken(grantKey(serviceKey), { v: 1, kind: "preview", ...grant });
}

export function verifyPreviewGrant(serviceKey: string, token: string | undefined): SignedCheck<PreviewGrant> {
  return verifyToken(grantKey(serviceKey), PreviewGrant, token);
}
