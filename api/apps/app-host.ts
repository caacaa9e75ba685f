import { Agent, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import httpProxy from "http-proxy";
import type { Forwarder } from "../../protocol/http-forward.ts";
import { type AuthDeps, authorizeProject, bearer, resolvePrincipal } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { refuseUpgrade, writeError } from "../http/error-handler.ts";
import type { createTtlCache } from "../ttl-cache.ts";
import type { AppDeployStore } from "./store.ts";

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
/** Where an app answers is read at most this often per app; a switch in this process drops it at once. */
export const APP_ENDPOINT_TTL_MS = 2000;

export type AppHostDeps = AuthDeps & {
  appDeploys: AppDeployStore;
  /** `<project>/<app>` to its live endpoint; the deployer drops an entry when that app's deploy switches. */
  appEndpoints: ReturnType<typeof createTtlCache<string, string | undefined>>;
  previewDomain: () => string | undefined;
};

/**
 * Apps at the root of their own origin, `<name>--<project>.<preview domain>`, served before Fastify sees the
 * request (like previews' hosts). A bearer token with access to the project is required; it never reaches the
 * app. Bodies and server-sent events stream; WebSocket upgrades pass through.
 */
export function createAppHosts(deps: AppHostDeps, forward: Forwarder, logError: (err: unknown) => void) {
  const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), proxyTimeout: 0 });
  const endpoints = deps.appEndpoints;
  let hostPattern: { domain: string | undefined; pattern: RegExp | undefined } | undefined;

  function appHost(host: string | undefined): { app: string; projectId: string } | undefined {
    const domain = deps.previewDomain();
    if (!hostPattern || hostPattern.domain !== domain) {
      const escaped = domain?.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      hostPattern = {
        domain,
        pattern: escaped ? new RegExp(`^([a-z0-9-]{1,24})--(${UUID})\\.${escaped}(?::\\d+)?$`, "i") : undefined,
      };
    }
    const match = host ? hostPattern.pattern?.exec(host) : undefined;
    return match ? { app: match[1]!.toLowerCase(), projectId: match[2]!.toLowerCase() } : undefined;
  }

  /** The live deploy's endpoint once the caller may reach the project. */
  async function target(req: IncomingMessage, place: { app: string; projectId: string }): Promise<string> {
    const principal = await resolvePrincipal(deps, bearer(req));
    await authorizeProject(deps, principal, place.projectId, false);
    const endpoint = await endpoints.get(`${place.projectId}/${place.app}`, () =>
      deps.appDeploys.liveEndpoint(place.projectId, place.app),
    );
    if (!endpoint) throw apiError("APP_NOT_FOUND", `app '${place.app}' has no live deploy`);
    delete req.headers.authorization;
    return endpoint;
  }

  const unreachable = (res: ServerResponse, err: Error) =>
    writeError(res, apiError("SANDBOX_UNREACHABLE", `app unreachable: ${err.message}`));

  return {
    /** Serves a request for an app's host; false when the request is for someone else. */
    serveHost(req: IncomingMessage, res: ServerResponse): boolean {
      const place = appHost(req.headers.host);
      if (!place) return false;
      target(req, place)
        .then((origin) => forward(req, res, origin, req.url ?? "/", { unreachable }))
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
        .then((origin) => proxy.ws(req, socket, head, { target: origin }, () => socket.destroy()))
        .catch((err) => refuseUpgrade(socket, err, logError));
      return true;
    },
  };
}

export type AppHosts = ReturnType<typeof createAppHosts>;
