import type { Server } from "node:http";
import { BlockList, createServer, isIPv4, type Server as NetServer } from "node:net";

/**
 * Lets sandboxes reach an API that listens on loopback only: a TCP listener on the host's address on the sandbox
 * network (their host.docker.internal) hands each connection to the API's own HTTP server. Only peers inside that
 * network's subnet are served, so a machine that routes to the address from outside gets nothing.
 */
export function createSandboxListener(
  server: Server,
  port: () => number,
  log: (msg: string, extra: Record<string, unknown>) => void,
) {
  let current: { address: string; listener: NetServer } | undefined;

  async function bind(network: { hostAddress: string; subnet: string }): Promise<void> {
    if (current?.address === network.hostAddress) return;
    current?.listener.close();
    current = undefined;
    const [base, bits] = network.subnet.split("/");
    const allowed = new BlockList();
    allowed.addSubnet(base!, Number(bits), "ipv4");
    const listener = createServer((socket) => {
      const peer = socket.remoteAddress?.replace(/^::ffff:/, "") ?? "";
      if (!isIPv4(peer) || !allowed.check(peer, "ipv4")) return void socket.destroy();
      server.emit("connection", socket);
    });
    // Recorded before it listens: the driver's report of the same network arrives while this one is binding.
    current = { address: network.hostAddress, listener };
    try {
      await new Promise<void>((resolve, reject) => {
        listener.once("error", reject);
        listener.listen(port(), network.hostAddress, () => resolve());
      });
    } catch (err) {
      if (current?.listener === listener) current = undefined;
      throw err;
    }
    log("listening for sandboxes", { address: `${network.hostAddress}:${port()}`, subnet: network.subnet });
  }

  return {
    bind,
    close: () => current?.listener.close(),
  };
}
