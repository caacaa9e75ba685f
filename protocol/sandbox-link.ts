import { z } from "zod";

/**
 * A sandbox's link: its daemon dials the API (a WebSocket to SANDBOX_LINK_PATH, its service key as the bearer) and
 * the API reaches the daemon through it, so no route into the sandbox is needed (issue 33). Over the WebSocket runs
 * one HTTP/2 session, the API its client: each CONNECT stream is one TCP connection to the daemon's own port.
 */
export const SANDBOX_LINK_PATH = "/svc/v1/sandbox-link";

/**
 * The Upgrade token of a spare connection: the daemon dials the link's URL with it (its service key as the bearer)
 * and, after the API's 101, the TCP connection is raw bytes the API may take for one connection to the daemon's
 * server, as if it had dialed the daemon itself (api/sandbox-links/spares.ts, daemon/link-spares.ts).
 */
export const SANDBOX_SPARE_UPGRADE = "svc-link-spare";

/** The sandbox's variable naming the link's URL (ws:// or wss://); unset: the daemon dials nothing. */
export const SANDBOX_LINK_ENV = "SVC_LINK_URL";

/**
 * The sandbox's variable naming a Unix socket of the API's, mounted into the sandbox, that the daemon dials the
 * link's URL through instead of TCP (the link and its spares): set by the Docker driver when the API runs on the
 * engine's host. A hop over it costs a preview's request a fraction of one over the sandbox network's bridge.
 */
export const SANDBOX_LINK_SOCKET_ENV = "SVC_LINK_SOCKET";

/** Where the Docker driver mounts the directory of the API's link socket in a sandbox, read-only. */
export const SANDBOX_LINK_SOCKET_MOUNT = "/run/svc-link";

/** The socket's name in that directory. */
export const SANDBOX_LINK_SOCKET_NAME = "api.sock";

/** SVC_SANDBOX_LINK: how the API reaches daemons, their container's address or the link they open. */
export const SandboxLinkMode = z.enum(["direct", "dial-out"]);
export type SandboxLinkMode = z.infer<typeof SandboxLinkMode>;

/**
 * The link URL's query parameter naming the API replica that waits for the link, by its address on the stack's
 * network (SVC_LINK_BRIDGE_HOST): the edge sends the link to that replica when it is one of those it spreads
 * requests over, and to any of them otherwise (api/edge/link-hint.ts).
 */
export const SANDBOX_LINK_REPLICA_PARAM = "replica";

/**
 * The link's URL from the API's origin as sandboxes reach it (SVC_API_URL's base): same place, ws scheme; with the
 * address of the replica that waits for it, when the API runs as several.
 */
export function sandboxLinkUrl(apiOrigin: string, replica?: string): string {
  const url = `${apiOrigin.replace(/\/+$/, "")}${SANDBOX_LINK_PATH}`.replace(/^http(s?):/i, "ws$1:");
  return replica ? `${url}?${SANDBOX_LINK_REPLICA_PARAM}=${encodeURIComponent(replica)}` : url;
}
