import type { IncomingHttpHeaders } from "node:http";
import type { Project } from "../../protocol/project.ts";
import { actingUserId, authorizeProject, bearer, checkSessionScope, resolvePrincipal } from "../auth/authenticate.ts";
import { requireRole } from "../auth/roles.ts";
import { leastRole } from "../auth/route-roles.ts";
import { apiError } from "../errors.ts";
import { isUuid } from "../projects/store.ts";
import { type SessionAccessDeps, sessionsOf } from "../sessions/session-access.ts";
import { PREVIEW_COOKIE, PREVIEW_PARAM, PreviewGrant, verifyPreviewGrant } from "./grant.ts";

const PREVIEW = "PREVIEW <port>-<session>.<preview domain>";

/** What a preview host names: `<port>-<session>.<preview domain>`. */
export type PreviewPlace = { sessionId: string; port: number };

export type PreviewAccess = {
  project: Project;
  userId: string;
  target: { url: string; serviceKey: string };
  /** Set when a link's grant arrived in the query: the cookie that carries it for the next requests. */
  grant?: { token: string; exp: number };
};

/** The grant cookie's values in a Cookie header, and the header without them (the sandbox never sees them). */
export function splitCookies(
  header: string | undefined,
  cookie = PREVIEW_COOKIE,
): { grants: string[]; rest: string | undefined } {
  const grants: string[] = [];
  const rest: string[] = [];
  for (const pair of (header ?? "").split(";")) {
    const trimmed = pair.trim();
    if (!trimmed) continue;
    if (trimmed.startsWith(`${cookie}=`)) grants.push(trimmed.slice(cookie.length + 1));
    else rest.push(trimmed);
  }
  return { grants, rest: rest.length ? rest.join("; ") : undefined };
}

/** A URL split into its path, the link's grant and the rest of the query, byte for byte as sent. */
export function splitUrl(
  url: string,
  param = PREVIEW_PARAM,
): { path: string; grant: string | undefined; query: string } {
  const at = url.indexOf("?");
  if (at < 0) return { path: url, grant: undefined, query: "" };
  let grant: string | undefined;
  const rest: string[] = [];
  for (const pair of url.slice(at + 1).split("&")) {
    if (pair.startsWith(`${param}=`)) grant ??= pair.slice(param.length + 1);
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
 * Who is previewing: a bearer token with access to the session's project (the API's usual rule, for clients such
 * as curl), or a preview link's grant from the query (first visit) or from the cookie that visit set. A grant
 * is bound to one user, project, session and port, and its user must still hold the role previews take.
 */
export async function authorizePreview(
  deps: SessionAccessDeps,
  req: { headers: IncomingHttpHeaders },
  place: PreviewPlace,
  fromQuery: string | undefined,
): Promise<PreviewAccess> {
  if (req.headers.authorization) {
    const principal = await resolvePrincipal(deps, bearer(req));
    // A session's own token previews its own sandbox only, as on every session route.
    checkSessionScope(principal, place.sessionId);
    const projectId = await sessionsOf(deps).projectOf(place.sessionId);
    if (!projectId) throw apiError("SESSION_NOT_FOUND", `session ${place.sessionId} not found`);
    const { project } = await authorizeProject(deps, principal, projectId, leastRole(PREVIEW));
    const target = await sessionsOf(deps).sandboxTarget(project, place.sessionId);
    return { project, userId: actingUserId(principal), target };
  }
  const candidates = fromQuery ? [fromQuery] : splitCookies(req.headers.cookie).grants;
  if (candidates.length === 0) {
    throw apiError("UNAUTHENTICATED", "missing preview link or Authorization: Bearer <token> header");
  }
  const invalid = () =>
    apiError("UNAUTHENTICATED", "invalid or expired preview link; run `svc sessions preview` for a new one");
  const projectId = claimedProject(candidates[0]!);
  const project = projectId && isUuid(projectId) ? await deps.projects.byId(projectId) : undefined;
  if (!project) throw invalid();
  const target = await sessionsOf(deps).sandboxTarget(project, place.sessionId);
  for (const candidate of candidates) {
    const check = verifyPreviewGrant(target.serviceKey, candidate);
    if (!check.ok) continue;
    const grant = check.value;
    if (grant.project_id !== project.id || grant.session_id !== place.sessionId || grant.port !== place.port) continue;
    const role = await deps.accounts.role(grant.user_id, project.account_id);
    if (!role) continue;
    // Still a member, but perhaps no longer one who may preview: said as it is, not as a bad link.
    requireRole(role, leastRole(PREVIEW));
    return {
      project,
      userId: grant.user_id,
      target,
      grant: fromQuery ? { token: candidate, exp: grant.exp } : undefined,
    };
  }
  throw invalid();
}
