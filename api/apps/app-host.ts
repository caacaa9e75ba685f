import { Agent, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import httpProxy from "http-proxy";
import type { Forwarder } from "../../protocol/http-forward.ts";
import { escapeRegExp } from "../../protocol/text.ts";
import { type AuthDeps, authorizeProject, bearer, resolvePrincipal } from "../auth/authenticate.ts";
import { atLeast } from "../auth/roles.ts";
import { leastRole } from "../auth/route-roles.ts";
import { apiError } from "../errors.ts";
import { refuseUpgrade, writeError } from "../http/error-handler.ts";
import { splitCookies, splitUrl } from "../previews/auth.ts";
import type { createTtlCache } from "../ttl-cache.ts";
import { APP_COOKIE, APP_PARAM, verifyAppGrant } from "./app-grant.ts";
import type { AppDeployStore } from "./store.ts";

const APP = "APP <app>--<project>.<preview domain>";
const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
/** Where an app answers is read at most this often per app; a switch in this process drops it at once. */
export const APP_ENDPOINT_TTL_MS = 2000;

export type AppHostDeps = AuthDeps & {
  appDeploys: AppDeployStore;
  /** `<project>/<app>` to its live endpoint; the deployer drops an entry when that app's deploy switches. */
  appEndpoints: ReturnType<typeof createTtlCache<string, string | undefined>>;
  previewDomain: () => string | undefined;
  publicUrl: () => string;
  /** Checks app links' grants (app-grant.ts); undefined: only bearer tokens are accepted. */
  appGrants: string | undefined;
};

type Place = { app: string; projectId: string };

/**
 * Apps at the root of their own origin, `<name>--<project>.<preview domain>`, served before Fastify sees the
 * request (like previews' hosts). A bearer token with access to the project, or an app link's grant (`svc apps
 * open`: in the query once, then in a cookie of this origin); neither reaches the app. Bodies and server-sent
 * events stream; WebSocket upgrades pass through.
 */
export function createAppHosts(deps: AppHostDeps, forward: Forwarder, logError: (err: unknown) => void) {
  const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), proxyTimeout: 0 });
  const endpoints = deps.appEndpoints;
  let hostPattern: { domain: string | undefined; pattern: RegExp | undefined } | undefined;

  function appHost(host: string | undefined): Place | undefined {
    const domain = deps.previewDomain();
    if (!hostPattern || hostPattern.domain !== domain) {
      const escaped = domain && escapeRegExp(domain);
      hostPattern = {
        domain,
        pattern: escaped ? new RegExp(`^([a-z0-9-]{1,24})--(${UUID})\\.${escaped}(?::\\d+)?$`, "i") : undefined,
      };
    }
    const match = host ? hostPattern.pattern?.exec(host) : undefined;
    return match ? { app: match[1]!.toLowerCase(), projectId: match[2]!.toLowerCase() } : undefined;
  }

  /** A link's grant for this app whose user still holds the role apps take in the project's account; else a 401. */
  async function checkGrant(place: Place, candidates: string[]): Promise<{ exp: number }> {
    const invalid = () =>
      apiError("UNAUTHENTICATED", `invalid or expired app link; run 'svc apps open ${place.app}' for a new one`);
    const project = deps.appGrants ? await deps.projects.byId(place.projectId) : undefined;
    if (!project) throw invalid();
    for (const candidate of candidates) {
      const check = verifyAppGrant(deps.appGrants!, candidate);
      if (!check.ok || check.value.project_id !== project.id || check.value.app !== place.app) continue;
      const role = await deps.accounts.role(check.value.user_id, project.account_id);
      if (role && atLeast(role, leastRole(APP))) return check.value;
    }
    throw invalid();
  }

  /**
   * The live deploy's endpoint once the caller may reach the project, and the request made fit for the app: no
   * credentials left in it; a link's first visit also gets the cookie that carries its grant from then on.
   */
  async function target(req: IncomingMessage, place: Place): Promise<{ origin: string; setCookie?: string }> {
    let setCookie: string | undefined;
    if (req.headers.authorization) {
      const principal = await resolvePrincipal(deps, bearer(req));
      await authorizeProject(deps, principal, place.projectId, leastRole(APP));
      delete req.headers.authorization;
    } else {
      const url = splitUrl(req.url ?? "/", APP_PARAM);
      const cookies = splitCookies(req.headers.cookie, APP_COOKIE);
      const candidates = url.grant ? [url.grant] : cookies.grants;
      if (candidates.length === 0)
        throw apiError(
          "UNAUTHENTICATED",
          `missing app link or Authorization: Bearer <token>; run 'svc apps open ${place.app}'`,
        );
      const { exp } = await checkGrant(place, candidates);
      if (url.grant) {
        const maxAge = exp - Math.floor(Date.now() / 1000);
        const secure = deps.publicUrl().startsWith("https:") ? "; Secure" : "";
        setCookie = `${APP_COOKIE}=${url.grant}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`;
        req.url = url.path + url.query;
      }
      if (cookies.rest) req.headers.cookie = cookies.rest;
      else delete req.headers.cookie;
    }
    const origin = await endpoints.get(`${place.projectId}/${place.app}`, () =>
      deps.appDeploys.liveEndpoint(place.projectId, place.app),
    );
    if (!origin) throw apiError("APP_NOT_FOUND", `app '${place.app}' has no live deploy`);
    return { origin, setCookie };
  }

  const unreachable = (res: ServerResponse, err: Error) =>
    writeError(res, apiError("SANDBOX_UNREACHABLE", `app unreachable: ${err.message}`));

  return {
    /** Serves a request for an app's host; false when the request is for someone else. */
    serveHost(req: IncomingMessage, res: ServerResponse): boolean {
      const place = appHost(req.headers.host);
      if (!place) return false;
      target(req, place)
        .then(({ origin, setCookie }) => forward(req, res, origin, req.url ?? "/", { setCookie, unreachable }))
        .catch((err) => {
          if (writeError(res, err) === 500) logError(err);
        });
      return true;
    },

    /** WebSocket upgrades on an app's host; false when the request is for someone else. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
      const place = appHost(req.headers.host);
      if (!place) return false;
      socket.on("error", () => socket.destroy());
      target(req, place)
        .then(({ origin }) => proxy.ws(req, socket, head, { target: origin }, () => socket.destroy()))
        .catch((err) => refuseUpgrade(socket, err, logError));
      return true;
    },
  };
}

export type AppHosts = ReturnType<typeof createAppHosts>;
