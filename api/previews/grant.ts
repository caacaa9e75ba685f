import { createHmac } from "node:crypto";
import { z } from "zod";
import { type SignedCheck, signToken, verifyToken } from "../../protocol/signed-token.ts";

/**
 * Preview links: `svc sessions preview` asks the API for a URL that works without an Authorization header (a
 * browser, curl). The URL carries a grant in `?svc_preview=`; the API checks it, remembers it in a cookie
 * scoped to the preview path, and forwards as the user it names. Grants are signed with a key derived from
 * the sandbox's service key, so a restarted sandbox voids its links and a grant is never a daemon credential.
 */
export const PREVIEW_PARAM = "svc_preview";
export const PREVIEW_COOKIE = "svc_preview";
export const PREVIEW_LINK_TTL_S = 3600;

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
