import { request } from "node:http";
import { WebSocket } from "ws";
import { SANDBOX_LINK_PATH, SANDBOX_SPARE_UPGRADE } from "../../protocol/sandbox-link.ts";

/**
 * Opens the sandbox link endpoint at `origin` (an API or the edge) as a daemon would, then closes it: 101 when it was
 * accepted, else the HTTP status it was refused with.
 */
export function dialLink(origin: string, headers: Record<string, string>, query = ""): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${origin.replace("http:", "ws:")}${SANDBOX_LINK_PATH}${query}`, { headers });
    ws.on("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on("open", () => {
      resolve(101);
      ws.terminate();
    });
    ws.on("error", reject);
  });
}

/** Dials a spare connection at `origin` as a daemon would, then closes it: 101 when it was held, else the status. */
export function dialSpare(origin: string, serviceKey: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${origin}${SANDBOX_LINK_PATH}`, {
      agent: false,
      headers: { authorization: `Bearer ${serviceKey}`, connection: "Upgrade", upgrade: SANDBOX_SPARE_UPGRADE },
    });
    req.on("upgrade", (res, socket) => {
      resolve(res.statusCode ?? 0);
      socket.destroy();
    });
    req.on("response", (res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
    });
    req.on("error", reject);
    req.end();
  });
}
