import type { PreviewLink } from "../../protocol/preview.ts";
import type { Project } from "../../protocol/project.ts";
import { PREVIEW_LINK_TTL_S, PREVIEW_PARAM, signPreviewGrant } from "./preview-grant.ts";
import { type SessionAccessDeps, sessionsOf } from "./session-access.ts";

export const previewPath = (projectId: string, sessionId: string, port: number) =>
  `/v1/projects/${projectId}/sessions/${encodeURIComponent(sessionId)}/preview/${port}/`;

export function previewOrigin(deps: SessionAccessDeps, sessionId: string, port: number): string | undefined {
  const domain = deps.previewDomain();
  if (!domain) return undefined;
  const api = new URL(deps.publicUrl());
  return `${api.protocol}//${port}-${sessionId}.${domain}${api.port ? `:${api.port}` : ""}`;
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
  const origin = previewOrigin(deps, sessionId, port);
  return {
    url: `${deps.publicUrl()}${previewPath(project.id, sessionId, port)}?${PREVIEW_PARAM}=${grant}`,
    browser_url: origin ? `${origin}/?${PREVIEW_PARAM}=${grant}` : null,
    port,
    expires_at: new Date(exp * 1000).toISOString(),
  };
}
