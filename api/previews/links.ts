import type { PreviewLink } from "../../protocol/preview.ts";
import type { Project } from "../../protocol/project.ts";
import { type SessionAccessDeps, sessionsOf } from "../sessions/session-access.ts";
import { PREVIEW_LINK_TTL_S, PREVIEW_PARAM, signPreviewGrant } from "./grant.ts";

/** `<port>-<session>.<preview domain>` on the API's scheme and port: where a sandbox port is served. */
export function previewOrigin(deps: SessionAccessDeps, sessionId: string, port: number): string {
  const api = new URL(deps.publicUrl());
  return `${api.protocol}//${port}-${sessionId}.${deps.previewDomain()}${api.port ? `:${api.port}` : ""}`;
}

/** Every preview origin of this API, as a CSP source (`http://*.localhost:7700`): where a preview link leads. */
export function previewOrigins(deps: SessionAccessDeps): string {
  const api = new URL(deps.publicUrl());
  return `${api.protocol}//*.${deps.previewDomain()}${api.port ? `:${api.port}` : ""}`;
}

/** `svc sessions preview`: URLs for one sandbox port that work without an Authorization header. */
export async function createPreviewLink(
  deps: SessionAccessDeps,
  project: Project,
  sessionId: string,
  userId: string,
  port: number,
): Promise<PreviewLink> {
  const target = await sessionsOf(deps).sandboxTarget(project, sessionId);
  const exp = Math.floor(Date.now() / 1000) + PREVIEW_LINK_TTL_S;
  const grant = signPreviewGrant(target.serviceKey, {
    user_id: userId,
    project_id: project.id,
    session_id: sessionId,
    port,
    exp,
  });
  return {
    url: `${previewOrigin(deps, sessionId, port)}/?${PREVIEW_PARAM}=${grant}`,
    port,
    expires_at: new Date(exp * 1000).toISOString(),
  };
}
