import { WebSocket } from "ws";
import { SANDBOX_LINK_PATH } from "../../protocol/sandbox-link.ts";

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
