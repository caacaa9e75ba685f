import { lookup } from "node:dns/promises";

/** How often the proxy's name is looked up again: a restarted edge container may get another address. */
const REFRESH_MS = 10_000;

/** `::ffff:172.18.0.3` (an IPv4 peer on a dual-stack socket) and `172.18.0.3` are one address. */
const plain = (address: string) => (address.startsWith("::ffff:") ? address.slice(7) : address);

/**
 * Fastify's `trustProxy` for the compose stack's edge (SVC_TRUSTED_PROXY, the edge's service name): only a
 * connection from the edge's own addresses may say who the client is, and only the last hop it added counts. A
 * sandbox reaches the API directly, so an X-Forwarded-For it writes is never believed: the rate limits and the
 * audit log see each person's address, not one for the whole stack nor one a sandbox chose.
 */
export function trustedProxy(host: string, resolve = (name: string) => lookup(name, { all: true })) {
  let addresses = new Set<string>();
  const refresh = async () => {
    try {
      addresses = new Set((await resolve(host)).map((a) => plain(a.address)));
    } catch {
      // Not resolvable now (the edge starting): nobody is trusted until it is.
    }
  };
  const ready = refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  timer.unref();
  return {
    ready,
    /** proxy-addr's question for each hop, the socket's peer first (0): trust only that peer, if it is the edge. */
    trust: (address: string, hop: number) => hop === 0 && addresses.has(plain(address)),
    stop: () => clearInterval(timer),
  };
}
