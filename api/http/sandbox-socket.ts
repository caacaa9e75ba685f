import { chmodSync, mkdirSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { createServer } from "node:net";
import { join } from "node:path";
import { SANDBOX_LINK_SOCKET_NAME } from "../../protocol/sandbox-link.ts";

/**
 * Hands each connection on `<dir>/api.sock` to the API's own HTTP server, as the sandbox listener does those on the
 * sandbox networks: a daemon's link and its spares (daemon/link-spares.ts), which carry its service key like any
 * other. The directory and the socket are the API's user's alone, like everything under its home: a sandbox's daemon
 * runs as root with CAP_DAC_OVERRIDE (docker-driver.ts), and one that cannot connect dials over TCP (daemon/link.ts).
 */
export async function listenForSandboxesAt(server: Server, dir: string): Promise<() => void> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, SANDBOX_LINK_SOCKET_NAME);
  // One the last API process left (a crash leaves the file): a listener cannot bind over it.
  rmSync(path, { force: true });
  const listener = createServer((socket) => server.emit("connection", socket));
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(path, () => resolve());
  });
  chmodSync(path, 0o600);
  return () => listener.close();
}
