import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { TunnelHead } from "../../protocol/http-head.ts";
import { type Admitted, type TunnelDeps, tunnelConnection, type UpstreamAddress } from "../../protocol/http-tunnel.ts";
import { USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { apiError } from "../errors.ts";
import { rawErrorResponse } from "../http/error-handler.ts";
import { splitCookies } from "./auth.ts";

/** A sandbox daemon as the tunnel dials it, parsed once per authorization rather than per request. */
export type DaemonAddress = { url: string; host: string; port: number; hostHeader: string };

export function daemonAddress(url: string): DaemonAddress | undefined {
  const parsed = new URL(url);
  if (parsed.protocol !== "http:") return undefined;
  return {
    url,
    host: parsed.hostname.replace(/^\[|\]$/g, ""),
    port: Number(parsed.port || 80),
    hostHeader: parsed.host,
  };
}

/**
 * Everything a connection's preview requests share once authorized, worked out on its first request and reused
 * while the next ones carry the very same Host, Authorization and Cookie values: the daemon to dial, the path
 * prefix, the Cookie line without the grant, and the headers the API sets. A request then costs a parse and one
 * string, not a lookup, a cookie split and a validation.
 */
export type PreviewRoute = {
  /** The header values the route was worked out for (undefined: absent). */
  host: string;
  authorization: string | undefined;
  cookie: string | undefined;
  /** The preview domain it was worked out under; the authorization's time, which bounds its reuse. */
  domain: string | undefined;
  at: number;
  upstream: string;
  address: UpstreamAddress;
  prefix: string;
  cookieLine: string;
  tail: string;
};

export function previewRoute(
  request: { host: string; authorization: string | undefined; cookie: string | undefined },
  domain: string | undefined,
  at: number,
  port: number,
  daemon: DaemonAddress,
  remote: string,
  context: string,
): PreviewRoute {
  const rest = request.cookie === undefined ? undefined : splitCookies(request.cookie).rest;
  return {
    ...request,
    domain,
    at,
    upstream: daemon.url,
    address: { host: daemon.host, port: daemon.port },
    prefix: `/proxy/${port}`,
    cookieLine: rest ? `cookie: ${rest}\r\n` : "",
    tail: `host: ${daemon.hostHeader}\r\nx-forwarded-for: ${remote}\r\n${USER_CONTEXT_HEADER}: ${context}\r\n\r\n`,
  };
}

/**
 * The request as the daemon gets it: `/proxy/{port}{target}`, the caller's token and grant cookies removed, any
 * user context the caller sent replaced by the API's own, the daemon's host and the caller's address. `head` must
 * carry the Cookie value `route` was worked out for (at most one Cookie line) and no grant in its query.
 */
export function routeRequest(head: TunnelHead, route: PreviewRoute): Admitted {
  let out = `${head.method} ${route.prefix}${head.target} HTTP/1.1\r\n`;
  for (const header of head.headers) {
    switch (header.lower) {
      case "cookie":
        out += route.cookieLine;
        break;
      case "host":
      case "authorization":
      case "x-forwarded-for":
      case USER_CONTEXT_HEADER:
        break;
      default:
        out += `${header.line}\r\n`;
    }
  }
  return { upstream: route.upstream, address: route.address, head: out + route.tail };
}

/**
 * Puts the preview fast path in front of the API's HTTP server: a connection whose requests are previews the
 * caller may see becomes a byte tunnel to the sandbox daemon (whose own fast path tunnels on to the app), instead
 * of each request being parsed, forwarded and its answer re-serialized here. Anything else, from the first
 * request that is not such a preview, is the full server's, as before.
 */
export function tunnelPreviews(
  server: Server,
  admit: TunnelDeps["admit"],
  /** An open connection to the daemon at this URL (a linked sandbox's spare), now or soon, when it has one. */
  spareFor: (url: string) => Socket | undefined | Promise<Socket | undefined>,
): void {
  const listeners = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  const fallback = (socket: Socket) => {
    for (const listener of listeners) listener.call(server, socket);
  };
  server.on("connection", (socket: Socket) =>
    tunnelConnection(socket, {
      admit,
      opened: (admitted) => spareFor(admitted.upstream),
      unreachable: (err) => rawErrorResponse(apiError("SANDBOX_UNREACHABLE", `sandbox unreachable: ${err.message}`)),
      fallback,
    }),
  );
}
