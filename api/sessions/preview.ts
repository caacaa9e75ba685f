import { Agent, type IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyRequest } from "fastify";
import httpProxy from "http-proxy";
import { z } from "zod";
import type { SessionService } from "../../orchestrator/sessions/service.ts";
import {
  PREVIEW_COOKIE,
  PREVIEW_LINK_TTL_S,
  PREVIEW_PARAM,
  type PreviewLink,
  PreviewPort,
  signPreviewGrant,
  verifyPreviewGrant,
} from "../../protocol/preview.ts";
import type { Project } from "../../protocol/project.ts";
import { signUserContext, USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { type AuthDeps, actingUserId, authorizeProject, bearer, resolvePrincipal } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { isUuid } from "../projects/store.ts";

const Params = z.object({
  projectId: z.string(),
  sessionId: z.string().min(1).max(100),
  port: PreviewPort,
});
/** A signed context lives a minute: long enough for one request, useless if it leaks. */
const CONTEXT_TTL_S = 60;

export type PreviewDeps = AuthDeps & { sessions: SessionService | undefined; publicUrl: () => string };

const previewPath = (projectId: string, sessionId: string, port: number) =>
  `/v1/projects/${projectId}/sessions/${encodeURIComponent(sessionId)}/preview/${port}/`;

function sessionsOf(deps: PreviewDeps): SessionService {
  if (!deps.sessions) throw apiError("NOT_CONFIGURED", "sessions are unavailable on this server");
  return deps.sessions;
}

/** `svc sessions preview`: a URL for one sandbox port that works without an Authorization header. */
export async function createPreviewLink(
  deps: PreviewDeps,
  project: Project,
  sessionId: string,
  userId: string,
  port: number,
): Promise<PreviewLink> {
  const target = await sessionsOf(deps).previewTarget(project, sessionId);
  const exp = Math.floor(Date.now() / 1000) + PREVIEW_LINK_TTL_S;
  const grant = signPreviewGrant(target.serviceKey, {
    user_id: userId,
    project_id: project.id,
    session_id: sessionId,
    port,
    exp,
  });
  return {
    url: `${deps.publicUrl()}${previewPath(project.id, sessionId, port)}?${PREVIEW_PARAM}=${grant}`,
    port,
    expires_at: new Date(exp * 1000).toISOString(),
  };
}

/** The `svc_preview` values of a Cookie header, and the header without them (the sandbox never sees them). */
function splitCookies(header: string | undefined): { grants: string[]; rest: string | undefined } {
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

/** The raw query split into the link's grant and the rest, byte for byte, so the app never sees the grant. */
function splitQuery(url: string): { grant: string | undefined; rest: string } {
  const at = url.indexOf("?");
  if (at < 0) return { grant: undefined, rest: "" };
  let grant: string | undefined;
  const rest: string[] = [];
  for (const pair of url.slice(at + 1).split("&")) {
    if (pair.startsWith(`${PREVIEW_PARAM}=`)) grant ??= pair.slice(PREVIEW_PARAM.length + 1);
    else rest.push(pair);
  }
  return { grant, rest: rest.length ? `?${rest.join("&")}` : "" };
}

/**
 * Preview requests: the API forwards to the sandbox daemon's /proxy/{port}/ with a freshly signed
 * X-Svc-User-Context for the user. Callers authenticate with a bearer token (the API's usual rule) or with
 * the grant of a preview link, from the query (first visit) or from the cookie the first visit set.
 */
export function previewRoutes(deps: PreviewDeps) {
  return async (app: FastifyInstance) => {
    const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), proxyTimeout: 0 });
    const cookiesToSet = new WeakMap<IncomingMessage, string>();
    proxy.on("proxyRes", (proxyRes, req) => {
      const cookie = cookiesToSet.get(req);
      if (cookie) proxyRes.headers["set-cookie"] = [...(proxyRes.headers["set-cookie"] ?? []), cookie];
    });
    // Request bodies of every type stream through untouched: no parser may consume them here.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", (_req, payload, done) => done(null, payload));

    async function authorize(req: FastifyRequest, params: z.infer<typeof Params>, fromQuery: string | undefined) {
      if (req.headers.authorization) {
        const principal = await resolvePrincipal(deps, bearer(req));
        const project = await authorizeProject(deps, principal, params.projectId, false);
        const target = await sessionsOf(deps).previewTarget(project, params.sessionId);
        return { project, userId: actingUserId(principal), target, cookie: undefined };
      }
      const cookies = splitCookies(req.headers.cookie);
      const candidates = fromQuery ? [fromQuery] : cookies.grants;
      const invalid = () =>
        apiError("UNAUTHENTICATED", "invalid or expired preview link; run `svc sessions preview` again");
      if (candidates.length === 0) {
        throw apiError("UNAUTHENTICATED", "missing Authorization: Bearer <token> header or preview link");
      }
      const project = isUuid(params.projectId) ? await deps.projects.byId(params.projectId) : undefined;
      if (!project) throw invalid();
      const target = await sessionsOf(deps).previewTarget(project, params.sessionId);
      for (const candidate of candidates) {
        const check = verifyPreviewGrant(target.serviceKey, candidate);
        if (!check.ok) continue;
        const grant = check.value;
        if (grant.project_id !== project.id || grant.session_id !== params.sessionId || grant.port !== params.port)
          continue;
        if (!(await deps.accounts.isMember(grant.user_id, project.account_id))) continue;
        const cookie = fromQuery ? { token: candidate, exp: grant.exp } : undefined;
        return { project, userId: grant.user_id, target, cookie };
      }
      throw invalid();
    }

    app.all(
      "/v1/projects/:projectId/sessions/:sessionId/preview/:port/*",
      { config: { auth: "public" } },
      async (req, reply) => {
        const params = parseInput(Params, req.params, "params");
        const query = splitQuery(req.url);
        const access = await authorize(req, params, query.grant);
        const headers = {
          [USER_CONTEXT_HEADER]: signUserContext(access.target.serviceKey, {
            user_id: access.userId,
            project_id: access.project.id,
            session_id: params.sessionId,
            exp: Math.floor(Date.now() / 1000) + CONTEXT_TTL_S,
          }),
        };
        delete req.raw.headers.authorization;
        const cookies = splitCookies(req.raw.headers.cookie);
        if (cookies.rest) req.raw.headers.cookie = cookies.rest;
        else delete req.raw.headers.cookie;
        if (access.cookie) {
          const path = previewPath(access.project.id, params.sessionId, params.port);
          const maxAge = access.cookie.exp - Math.floor(Date.now() / 1000);
          const secure = deps.publicUrl().startsWith("https:") ? "; Secure" : "";
          cookiesToSet.set(
            req.raw,
            `${PREVIEW_COOKIE}=${access.cookie.token}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`,
          );
        }
        reply.hijack();
        // The rest of the path exactly as the client sent it: the router's decoded copy is not a valid URL.
        const rest =
          /^\/v1\/projects\/[^/]+\/sessions\/[^/]+\/preview\/[^/]+\/([^?]*)/.exec(req.raw.url ?? "")?.[1] ?? "";
        req.raw.url = `/proxy/${params.port}/${rest}${query.rest}`;
        proxy.web(req.raw, reply.raw, { target: access.target.url, headers }, (err) => {
          if (!reply.raw.headersSent) reply.raw.writeHead(502, { "content-type": "application/json" });
          reply.raw.end(JSON.stringify({ error: `sandbox unreachable: ${err.message}`, code: "REPO_UNAVAILABLE" }));
        });
      },
    );
  };
}
