import type { Socket } from "node:net";
import type { TunnelHead } from "../protocol/http-head.ts";
import { type Admitted, tunnelConnection } from "../protocol/http-tunnel.ts";
import type { ContextCheck } from "./auth.ts";
import { type DaemonError, daemonError, rawErrorResponse } from "./errors.ts";
import { isPageNavigation, rawWaitingPage } from "./port-waiting.ts";
import type { ProxyTarget } from "./proxy-target.ts";

export type TunnelDeps = {
  contextHeader: string;
  checkContext(header: string | undefined): ContextCheck;
  /** `/proxy/{port}/rest` -> port and path, as the full server parses it (the daemon's own port refused). */
  target(url: string): ProxyTarget | { error: DaemonError } | undefined;
  touch(): void;
  /** The full HTTP server's connection handler: everything the fast path does not take. */
  fallback(socket: Socket): void;
};

/** What a person previewing a port needs to read when nothing answers there. */
export function upstreamError(port: number, err: Error): string {
  return (err as NodeJS.ErrnoException).code === "ECONNREFUSED"
    ? `nothing is listening on port ${port} in the sandbox`
    : `port ${port} in the sandbox is unreachable: ${err.message}`;
}

/**
 * A `/proxy/{port}/` request with exactly one valid user context, rewritten for the port: the context, host and
 * forwarded-for headers replaced. Bad or missing contexts and the daemon's own port are left to the full server,
 * which answers them.
 */
/** A proxied request, and whether a browser is opening it as a page (what it gets when nothing listens). */
type ProxyRequest = Admitted & { port: number; navigation: boolean };

function admit(head: TunnelHead, remote: string, deps: TunnelDeps): ProxyRequest | undefined {
  if (!head.target.startsWith("/proxy/")) return undefined;
  const target = deps.target(head.target);
  if (!target || "error" in target) return undefined;
  let context: string | undefined;
  let accept: string | undefined;
  let fetchMode: string | undefined;
  const kept: string[] = [];
  for (const header of head.headers) {
    if (header.lower === "accept") accept = header.value;
    else if (header.lower === "sec-fetch-mode") fetchMode = header.value;
    if (header.lower === deps.contextHeader) {
      if (context !== undefined) return undefined;
      context = header.value;
    } else if (header.lower !== "host" && header.lower !== "x-forwarded-for") kept.push(header.line);
  }
  if (!deps.checkContext(context).ok) return undefined;
  deps.touch();
  kept.push(`host: 127.0.0.1:${target.port}`, `x-forwarded-for: ${remote}`);
  return {
    upstream: String(target.port),
    address: { host: "127.0.0.1", port: target.port },
    head: `${head.method} ${target.path} HTTP/1.1\r\n${kept.join("\r\n")}\r\n\r\n`,
    port: target.port,
    navigation: isPageNavigation(head.method, accept, fetchMode),
  };
}

/**
 * The daemon's proxy fast path (tunnel.ts): a connection of plain `/proxy/{port}/` requests becomes
 * a tunnel to that port, the user context checked on every request. This keeps a dev server behind the proxy near
 * its direct throughput.
 */
export function handleConnection(socket: Socket, deps: TunnelDeps): void {
  tunnelConnection(socket, {
    admit: (head, client) => admit(head, client.remoteAddress ?? "", deps),
    unreachable: (err, request) => {
      const message = upstreamError(request.port, err);
      return request.navigation
        ? rawWaitingPage(message)
        : rawErrorResponse(daemonError("UPSTREAM_UNAVAILABLE", message));
    },
    fallback: deps.fallback,
  });
}
