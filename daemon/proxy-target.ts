import { type DaemonError, daemonError } from "./errors.ts";

export type ProxyTarget = { port: number; path: string };

/**
 * `/proxy/{port}/rest?query` -> the sandbox port and the path to ask it for (`/rest?query`); undefined when the
 * URL is not a proxy path. Anything but 1-65535 in digits is a bad request, and the daemon's own port is refused:
 * its control surface is never reachable through the proxy.
 */
export function proxyTarget(url: string, servicePort: number): ProxyTarget | { error: DaemonError } | undefined {
  const match = /^\/proxy\/([^/?]*)(.*)$/.exec(url);
  if (!match) return undefined;
  const port = Number(match[1]);
  if (!/^\d{1,5}$/.test(match[1]!) || port < 1 || port > 65535)
    return { error: daemonError("BAD_REQUEST", `'${match[1]}' is not a port`) };
  if (port === servicePort) return { error: daemonError("FORBIDDEN", "the daemon's own port cannot be proxied") };
  const rest = match[2] || "/";
  return { port, path: rest.startsWith("/") ? rest : `/${rest}` };
}
