import type { IncomingMessage } from "node:http";
import type { SessionService } from "../../orchestrator/sessions/service.ts";
import {
  PREVIEW_COOKIE,
  PREVIEW_LINK_TTL_S,
  PREVIEW_PARAM,
  PreviewGrant,
  type PreviewLink,
  signPreviewGrant,
  verifyPreviewGrant,
} from "../../protocol/preview.ts";
import type { Project } from "../../protocol/project.ts";
import { type AuthDeps, actingUserId, authorizeProject, bearer, resolvePrincipal } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { isUuid } from "../projects/store.ts";

export type PreviewDeps = AuthDeps & {
  sessions: SessionService | undefined;
  publicUrl: () => string;
  /** `<port>-<session>.<domain>` serves a preview at the root of its own origin; undefined turns that off. */
  previewDomain: () => string | undefined;
};

/** Where a preview is served: under the API's path, or at the root of its own host. */
export type PreviewPlace = { projectId?: string; sessionId: string; port: number };

export type PreviewAccess = {
  project: Project;
  userId: string;
  target: { url: string; serviceKey: string };
  /** Set when a link's grant arrived in the query: the cookie that carries it for the next requests. */
  grant?: { token: string; exp: number };
};

export function sessionsOf(deps: { sessions: SessionService | undefined }): SessionService {
  if (!deps.sessions) throw apiError("NOT_CONFIGURED", "sessions are unavailable on this server");
  return deps.sessions;
}

export const previewPath = (projectId: string, sessionId: string, port: number) =>
  `/v1/projects/${projectId}/sessions/${encodeURIComponent(sessionId)}/preview/${port}/`;

export function previewOrigin(deps: PreviewDeps, sessionId: string, port: number): string | undefined {
  const domain = deps.previewDomain();
  if (!domain) return undefined;
  const api = new URL(deps.publicUrl());
  return `${api.protocol}//${port}-${sessionId}.${domain}${api.port ? `:${api.port}` : ""}`;
}

/** `svc sessions preview`: URLs for one sandbox port that work without an Authorization header. */
export async function createPreviewLink(
  deps: PreviewDeps,
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

/** The `svc_preview` values of a Cookie header, and the header without them (the sandbox never sees them). */
export function splitCookies(header: string | undefined): { grants: string[]; rest: string | undefined } {
  const grants: string[] = [];
  const rest: string[] = [];
  for (const pair of (header ?? "").split(";")) {
    const trimmed = pair.trim();
    if (!trimmed) continue;
    if (trimmed.startsWith(`${PREVIEW_COOKIE}=`)) grants.push(trimmed.slice(PREVIEW_COOKIE.length + 1));
    else rest.push(trimmed);
  }
  return { grants, rest: rest.length ? rest.join("; ") : undefined };
}

/** A URL split into its path, the link's grant and the rest of the query, byte for byte as sent. */
export function splitUrl(url: string): { path: string; grant: string | undefined; query: string } {
  const at = url.indexOf("?");
  if (at < 0) return { path: url, grant: undefined, query: "" };
  let grant: string | undefined;
  const rest: string[] = [];
  for (const pair of url.slice(at + 1).split("&")) {
    if (pair.startsWith(`${PREVIEW_PARAM}=`)) grant ??= pair.slice(PREVIEW_PARAM.length + 1);
    else rest.push(pair);
  }
  return { path: url.slice(0, at), grant, query: rest.length ? `?${rest.join("&")}` : "" };
}

/** The project a grant names, read before its signature can be checked (the key belongs to that project). */
function claimedProject(token: string): string | undefined {
  try {
    const claimed = PreviewGrant.safeParse(JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString()));
    return claimed.success ? claimed.data.project_id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Who is previewing: a bearer token with access to the project (the API's usual rule, path-based previews
 * only), or a preview link's grant from the query (first visit) or from the cookie that visit set. A grant
 * is bound to one user, project, session and port, and its user must still be a member of the account.
 */
export async function authorizePreview(
  deps: PreviewDeps,
  req: IncomingMessage,
  place: PreviewPlace,
  fromQuery: string | undefined,
): Promise<PreviewAccess> {
  if (req.headers.authorization && place.projectId) {
    const principal = await resolvePrincipal(deps, bearer(req));
    const project = await authorizeProject(deps, principal, place.projectId, false);
    const target = await sessionsOf(deps).sandboxTarget(project, place.sessionId);
    return { project, userId: actingUserId(principal), target };
  }
  const candidates = fromQuery ? [fromQuery] : splitCookies(req.headers.cookie).grants;
  if (candidates.length === 0) {
    throw apiError("UNAUTHENTICATED", "missing preview link or Authorization: Bearer <token> header");
  }
  const invalid = () =>
    apiError("UNAUTHENTICATED", "invalid or expired preview link; run `svc sessions preview` for a new one");
  const projectId = place.projectId ?? claimedProject(candidates[0]!);
  const project = projectId && isUuid(projectId) ? await deps.projects.byId(projectId) : undefined;
  if (!project) throw invalid();
  const target = await sessionsOf(deps).sandboxTarget(project, place.sessionId);
  for (const candidate of candidates) {
    const check = verifyPreviewGrant(target.serviceKey, candidate);
    if (!check.ok) continue;
    const grant = check.value;
    if (grant.project_id !== project.id || grant.session_id !== place.sessionId || grant.port !== place.port) continue;
    if (!(await deps.accounts.isMember(grant.user_id, project.account_id))) continue;
    return {
      project,
      userId: grant.user_id,
      target,
      grant: fromQuery ? { token: candidate, exp: grant.exp } : undefined,
    };
  }
  throw invalid();
}
