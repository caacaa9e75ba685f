import { Agent, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import httpProxy from "http-proxy";
import { z } from "zod";
import type { Forwarder } from "../../protocol/http-forward.ts";
import type { TunnelHead } from "../../protocol/http-head.ts";
import type { Admitted } from "../../protocol/http-tunnel.ts";
import { PreviewPort } from "../../protocol/preview.ts";
import { escapeRegExp } from "../../protocol/text.ts";
import { signUserContext, USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { apiError } from "../errors.ts";
import { refuseUpgrade, writeError } from "../http/error-handler.ts";
import type { SessionAccessDeps } from "../sessions/session-access.ts";
import { authorizePreview, type PreviewAccess, type PreviewPlace, splitCookies, splitUrl } from "./auth.ts";
import { PREVIEW_COOKIE, PREVIEW_PARAM } from "./grant.ts";
import { type DaemonAddress, daemonAddress, type PreviewRoute, previewRoute, routeRequest } from "./tunnel.ts";

/** A signed context lives a minute: long enough for one request, useless if it leaks. */
const CONTEXT_TTL_S = 60;
/**
 * A connection's authorization is reused this long: a page's requests on one keep-alive connection pay for the
 * grant check, the membership lookup and the context signature once, and a revoked grant or membership still
 * stops working within this bound.
 */
const CONNECTION_AUTH_MS = 5000;
const SESSION_ID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

const Place = z.object({ sessionId: z.string().min(1).max(100), port: PreviewPort });

/**
 * Previews of sandbox ports, served only at the root of their own host, `<port>-<session>.<preview domain>`: a
 * page an agent serves runs in an origin of its own, never the API's or the dashboard's, so it can reach neither
 * their cookies nor their same-origin APIs; and an app's root-relative paths (`/src/main.ts`, `/@vite/client`)
 * resolve as they do on the developer's machine. The API forwards to the sandbox daemon's /proxy/{port}/ with a
 * freshly signed X-Svc-User-Context for the user; the caller's token, the link's grant and its cookie never reach
 * the sandbox. WebSocket upgrades (dev-server hot reload) pass through.
 */
export function createPreviews(deps: SessionAccessDeps, forward: Forwarder, logError: (err: unknown) => void) {
  // Plain requests go through `forward`'s undici pools; WebSocket upgrades through http-proxy.
  const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), proxyTimeout: 0 });
  const secure = () => (deps.publicUrl().startsWith("https:") ? "; Secure" : "");
  let hostPattern: { domain: string | undefined; pattern: RegExp | undefined } | undefined;
  /** `<port>-<session>.<domain>[:port]`, rebuilt only if the domain changes (the public URL may be known late). */
  const previewHost = (host: string | undefined) => {
    const domain = deps.previewDomain();
    if (!hostPattern || hostPattern.domain !== domain) {
      const escaped = domain && escapeRegExp(domain);
      hostPattern = {
        domain,
        pattern: escaped ? new RegExp(`^(\\d{1,5})-(${SESSION_ID})\\.${escaped}(?::\\d+)?$`, "i") : undefined,
      };
    }
    return host ? hostPattern.pattern?.exec(host) : undefined;
  };

  type Authorized = {
    key: string;
    at: number;
    access: PreviewAccess;
    context: string;
    daemon: DaemonAddress | undefined;
  };
  type Socket = IncomingMessage["socket"];
  const byConnection = new WeakMap<Socket, Authorized>();

  /**
   * Who may see this preview, and the user context the daemon gets: checked on a connection's first request and
   * reused for the same credentials and place on that connection for CONNECTION_AUTH_MS. A link's first visit
   * (the grant in the query) is always checked.
   */
  function cachedAuthorization(socket: Socket, headers: IncomingHttpHeaders, place: PreviewPlace) {
    const credential = headers.authorization ?? splitCookies(headers.cookie).grants.join(";");
    const key = `${place.sessionId}/${place.port}/${credential}`;
    const cached = byConnection.get(socket);
    return {
      key,
      cached: cached && cached.key === key && Date.now() - cached.at < CONNECTION_AUTH_MS ? cached : undefined,
    };
  }

  async function authorize(
    socket: Socket,
    headers: IncomingHttpHeaders,
    place: PreviewPlace,
    fromQuery: string | undefined,
  ): Promise<Authorized> {
    const { key, cached } = cachedAuthorization(socket, headers, place);
    if (cached && !fromQuery) return cached;
    const now = Date.now();
    const access = await authorizePreview(deps, { headers }, place, fromQuery);
    const context = signUserContext(access.target.serviceKey, {
      user_id: access.userId,
      project_id: access.project.id,
      session_id: place.sessionId,
      exp: Math.floor(now / 1000) + CONTEXT_TTL_S,
    });
    const authorized = { key, at: now, access, context, daemon: daemonAddress(access.target.url) };
    if (!fromQuery) byConnection.set(socket, authorized);
    return authorized;
  }

  /** Rewrites the request for the daemon: strips credentials, adds the user context, remembers the cookie. */
  function prepare(req: IncomingMessage, authorized: Authorized, place: PreviewPlace, rest: string) {
    const { access } = authorized;
    delete req.headers.authorization;
    const cookies = splitCookies(req.headers.cookie);
    if (cookies.rest) req.headers.cookie = cookies.rest;
    else delete req.headers.cookie;
    const setCookie = access.grant
      ? `${PREVIEW_COOKIE}=${access.grant.token}; Path=/; Max-Age=${access.grant.exp - Math.floor(Date.now() / 1000)}; HttpOnly; SameSite=Lax${secure()}`
      : undefined;
    req.url = `/proxy/${place.port}${rest.startsWith("/") ? rest : `/${rest}`}`;
    return { target: access.target.url, headers: { [USER_CONTEXT_HEADER]: authorized.context }, setCookie };
  }

  const unreachable = (res: ServerResponse, err: Error) =>
    writeError(res, apiError("SANDBOX_UNREACHABLE", `sandbox unreachable: ${err.message}`));

  function fail(res: ServerResponse, err: unknown) {
    if (writeError(res, err) === 500) logError(err);
  }

  /** The session and port a preview host names, and the path asked for; undefined when it is not a preview. */
  function placeOf(url: string, hostHeader: string | undefined) {
    const host = previewHost(hostHeader);
    if (!host) return undefined;
    const place = Place.safeParse({ port: host[1], sessionId: host[2]!.toLowerCase() });
    return place.success ? { ...place.data, rest: url } : undefined;
  }

  async function web(req: IncomingMessage, res: ServerResponse, place: NonNullable<ReturnType<typeof placeOf>>) {
    const url = splitUrl(place.rest);
    const authorized = await authorize(req.socket, req.headers, place, url.grant);
    const { target, headers, setCookie } = prepare(req, authorized, place, url.path + url.query);
    // A link's first visit closes its connection: the page's next requests, carrying the cookie, open one that the
    // tunnel takes, instead of staying on this slower path for the connection's life.
    if (setCookie) res.setHeader("connection", "close");
    await forward(req, res, target, req.url!, { headers, setCookie, unreachable });
  }

  /** Each tunnelled connection's route (tunnel.ts), reused while its requests carry the same host and credentials. */
  const routes = new WeakMap<Socket, PreviewRoute>();

  /** A route for the connection from its authorization; undefined for a daemon not on plain HTTP. */
  function routeFor(
    socket: Socket,
    request: { host: string; authorization: string | undefined; cookie: string | undefined },
    port: number,
    authorized: Authorized,
  ): PreviewRoute | undefined {
    if (!authorized.daemon) return undefined;
    const route = previewRoute(
      request,
      deps.previewDomain(),
      authorized.at,
      port,
      authorized.daemon,
      socket.remoteAddress ?? "",
      authorized.context,
    );
    routes.set(socket, route);
    return route;
  }

  /**
   * The tunnel's admission (tunnel.ts): a preview request with a bearer token or a grant cookie, on the
   * connection's authorization or a fresh one. A link's first visit (its grant in the query, answered with a
   * cookie), a daemon not on plain HTTP and anything refused are left to the full server, which answers as before.
   * A connection's next requests with the same host and credentials take its route as it is, within
   * CONNECTION_AUTH_MS of the authorization, as the full server's would.
   */
  function admit(head: TunnelHead, socket: Socket): Admitted | undefined | Promise<Admitted | undefined> {
    let host: string | undefined;
    let authorization: string | undefined;
    let cookie: string | undefined;
    for (const header of head.headers) {
      // The credentials and routing headers, each at most once.
      if (header.lower === "host") {
        if (host !== undefined) return undefined;
        host = header.value;
      } else if (header.lower === "authorization") {
        if (authorization !== undefined) return undefined;
        authorization = header.value;
      } else if (header.lower === "cookie") {
        if (cookie !== undefined) return undefined;
        cookie = header.value;
      }
    }
    if (host === undefined || (!authorization && !cookie)) return undefined;
    if (head.target.includes(`${PREVIEW_PARAM}=`) && splitUrl(head.target).grant !== undefined) return undefined;
    const route = routes.get(socket);
    if (
      route &&
      route.host === host &&
      route.authorization === authorization &&
      route.cookie === cookie &&
      route.domain === deps.previewDomain() &&
      Date.now() - route.at < CONNECTION_AUTH_MS
    )
      return routeRequest(head, route);
    return admitAfresh(head, socket, { host, authorization, cookie });
  }

  /** The first request of a connection, or one whose host or credentials changed: placed and authorized again. */
  function admitAfresh(
    head: TunnelHead,
    socket: Socket,
    request: { host: string; authorization: string | undefined; cookie: string | undefined },
  ): Admitted | undefined | Promise<Admitted | undefined> {
    let place: ReturnType<typeof placeOf>;
    try {
      place = placeOf(head.target, request.host);
    } catch {
      return undefined;
    }
    if (!place) return undefined;
    const { port } = place;
    const headers = { host: request.host, authorization: request.authorization, cookie: request.cookie };
    const toDaemon = (authorized: Authorized) => {
      const route = routeFor(socket, request, port, authorized);
      return route && routeRequest(head, route);
    };
    const { cached } = cachedAuthorization(socket, headers, place);
    if (cached) return toDaemon(cached);
    return authorize(socket, headers, place, undefined).then(toDaemon);
  }

  return {
    admit,

    /** Serves a request for a preview host; false when the request is for the API itself. */
    serveHost(req: IncomingMessage, res: ServerResponse): boolean {
      if (!previewHost(req.headers.host)) return false;
      const place = placeOf(req.url ?? "/", req.headers.host);
      if (!place) fail(res, apiError("NOT_FOUND", "not a preview host"));
      else web(req, res, place).catch((err) => fail(res, err));
      return true;
    },

    /** WebSocket upgrades on a preview host; anything else is refused. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      socket.on("error", () => socket.destroy());
      (async () => {
        const place = placeOf(req.url ?? "/", req.headers.host);
        if (!place) throw apiError("NOT_FOUND", `no WebSocket endpoint at ${req.url?.split("?")[0]}`);
        const url = splitUrl(place.rest);
        const { target, headers } = prepare(
          req,
          await authorize(req.socket, req.headers, place, url.grant),
          place,
          url.path + url.query,
        );
        proxy.ws(req, socket, head, { target, headers }, () => socket.destroy());
      })().catch((err) => refuseUpgrade(socket, err, logError));
    },
  };
}

export type Previews = ReturnType<typeof createPreviews>;
