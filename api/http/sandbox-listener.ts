import { once } from "node:events";
import type { Server } from "node:http";
import { BlockList, createServer, isIPv4, type Server as NetServer } from "node:net";

/**
 * Lets sandboxes reach an API that listens on loopback only: a TCP listener on the host's address on each sandbox
 * network (their host.docker.internal) hands each connection to the API's own HTTP server. Only peers inside that
 * network's subnet are served, so a machine that routes to the address from outside gets nothing.
 */
export function createSandboxListener(
  server: Server,
  port: () => number,
  log: (msg: string, extra: Record<string, unknown>) => void,
) {
  // By address: the open and the internal network each have one; a network made again elsewhere adds another.
  const listeners = new Map<string, { listener: NetServer; ready: Promise<void> }>();

  async function listen(listener: NetServer, network: { hostAddress: string; subnet: string }): Promise<void> {
    // Same port as the API's, so the API must listen first (a sandbox may be started before it does).
    if (!server.listening) await once(server, "listening");
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(port(), network.hostAddress, () => resolve());
    });
    log("listening for sandboxes", { address: `${network.hostAddress}:${port()}`, subnet: network.subnet });
  }

  /** Listens on the network's host address, once per address; a later call for it waits for the same listener. */
  function bind(network: { hostAddress: string; subnet: string }): Promise<void> {
    const known = listeners.get(network.hostAddress);
    if (known) return known.ready;
    const [base, bits] = network.subnet.split("/");
    const allowed = new BlockList();
    allowed.addSubnet(base!, Number(bits), "ipv4");
    const listener = createServer((socket) => {
      const peer = socket.remoteAddress?.replace(/^::ffff:/, "") ?? "";
      if (!isIPv4(peer) || !allowed.check(peer, "ipv4")) return void socket.destroy();
      server.emit("connection", socket);
    });
    const ready = listen(listener, network);
    const entry = { listener, ready };
    listeners.set(network.hostAddress, entry);
    // A failed bind is tried again by the next sandbox.
    ready.catch(() => {
      if (listeners.get(network.hostAddress) === entry) listeners.delete(network.hostAddress);
    });
    return ready;
  }

  return {
    bind,
    close: () => {
      for (const { listener } of listeners.values()) listener.close();
    },
  };
}
