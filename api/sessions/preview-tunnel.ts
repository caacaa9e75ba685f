import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { type Admitted, type TunnelDeps, type TunnelHead, tunnelConnection } from "../../protocol/http-tunnel.ts";
import { USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { apiError } from "../errors.ts";
import { rawErrorResponse } from "../http/error-handler.ts";
import { splitCookies } from "./preview-auth.ts";

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

/** The credentials and routing headers of a preview request, each at most once; undefined when one repeats. */
export function previewHeaders(
  head: TunnelHead,
): { host?: string; authorization?: string; cookie?: string } | undefined {
  const seen: { host?: string; authorization?: string; cookie?: string } = {};
  for (const header of head.headers) {
    const name = header.lower;
    if (name !== "host" && name !== "authorization" && name !== "cookie") continue;
    if (seen[name] !== undefined) return undefined;
    seen[name] = header.value;
  }
  return seen;
}

/**
 * The request as the daemon gets it: `/proxy/{port}{path}`, the caller's token and grant cookies removed, any
 * user context the caller sent replaced by the API's own, the daemon's host and the caller's address.
 */
export function daemonRequest(
  head: TunnelHead,
  remote: string,
  daemon: DaemonAddress,
  path: string,
  context: string,
): Admitted {
  const kept: string[] = [];
  for (const header of head.headers) {
    const name = header.lower;
    if (name === "cookie") {
      const rest = splitCookies(header.value).rest;
      if (rest) kept.push(`cookie: ${rest}`);
    } else if (
      name !== "host" &&
      name !== "authorization" &&
      name !== "x-forwarded-for" &&
      name !== USER_CONTEXT_HEADER
    )
      kept.push(header.line);
  }
  kept.push(`host: ${daemon.hostHeader}`, `x-forwarded-for: ${remote}`, `${USER_CONTEXT_HEADER}: ${context}`);
  return {
    upstream: daemon.url,
    connect: () => connect({ host: daemon.host, port: daemon.port }),
    head: `${head.method} ${path} HTTP/1.1\r\n${kept.join("\r\n")}\r\n\r\n`,
  };
}

/**
 * Puts the preview fast path in front of the API's HTTP server: a connection whose requests are previews the
 * caller may see becomes a byte tunnel to the sandbox daemon (whose own fast path tunnels on to the app), instead
 * of each request being parsed, forwarded and its answer re-serialized here. Anything else, from the first
 * request that is not such a preview, is the full server's, as before.
 */
export function tunnelPreviews(server: Server, admit: TunnelDeps["admit"]): void {
  const listeners = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  const fallback = (socket: Socket) => {
    for (const listener of listeners) listener.call(server, socket);
  };
  server.on("connection", (socket: Socket) =>
    tunnelConnection(socket, {
      admit,
      unreachable: (err) => rawErrorResponse(apiError("SANDBOX_UNREACHABLE", `sandbox unreachable: ${err.message}`)),
      fallback,
    }),
  );
}
