import { type DaemonError, daemonError } from "./errors.ts";

export type ProxyTarget = { port: number; path: string };

/** The sandbox's own ports: the daemon's control surface and the agent runtime (which runs shell commands). */
export type OwnPorts = { servicePort: number; agentPort: number };

/**
 * `/proxy/{port}/rest?query` -> the sandbox port and the path to ask it for (`/rest?query`); undefined when the
 * URL is not a proxy path. Anything but 1-65535 in digits is a bad request, and the sandbox's own ports are
 * refused: a preview link (which a person may share) never reaches the control surface or the agent's shell.
 */
export function proxyTarget(url: string, own: OwnPorts): ProxyTarget | { error: DaemonError } | undefined {
  const match = /^\/proxy\/([^/?]*)(.*)$/.exec(url);
  if (!match) return undefined;
  const port = Number(match[1]);
  if (!/^\d{1,5}$/.test(match[1]!) || port < 1 || port > 65535)
    return { error: daemonError("BAD_REQUEST", `'${match[1]}' is not a port`) };
  if (port === own.servicePort) return { error: daemonError("FORBIDDEN", "the daemon's own port cannot be proxied") };
  if (port === own.agentPort)
    return {
      error: daemonError("FORBIDDEN", "the agent runtime's port cannot be proxied: talk to it with svc sessions chat"),
    };
  const rest = match[2] || "/";
  return { port, path: rest.startsWith("/") ? rest : `/${rest}` };
}
