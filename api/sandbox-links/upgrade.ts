import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import { z } from "zod";
import { LINK_MAX_MESSAGE } from "../../protocol/link-transport.ts";
import { SANDBOX_LINK_PATH, SANDBOX_SPARE_UPGRADE } from "../../protocol/sandbox-link.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { bearer } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { refuseUpgrade } from "../http/error-handler.ts";
import type { SandboxLinks } from "./registry.ts";

/** A sandbox service key as a bearer: nothing else ever opens a link. */
const ServiceKey = z.string().startsWith(SERVICE_KEY_PREFIX).max(256);

/**
 * A preview host (`<port>-<session id>.<domain>`) owns every path, this one too: a sandbox's app may serve it.
 * Sandboxes dial the API by its own name, never by a preview's.
 */
const PREVIEW_HOST = /^\d{1,5}-[0-9a-f]{8}-[0-9a-f]{4}-/i;

/**
 * `GET /svc/v1/sandbox-link` (WebSocket), the daemons' way in: the bearer must be a live sandbox's service key, or
 * one announced for a sandbox being made; anything else gets 401 and nothing is registered. The link is then the
 * registry's (registry.ts). The same request upgraded to `svc-link-spare` is a spare connection of a sandbox whose
 * link is up here (spares.ts), refused with 409 otherwise. Returns false for any other upgrade, which stays the
 * other handlers'.
 */
export function sandboxLinkUpgrade(links: SandboxLinks, logError: (err: unknown) => void) {
  const server = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: LINK_MAX_MESSAGE });
  return (req: IncomingMessage, socket: Duplex, head: Buffer): boolean => {
    const upgrade = req.headers.upgrade?.toLowerCase();
    if (upgrade !== "websocket" && upgrade !== SANDBOX_SPARE_UPGRADE) return false;
    if ((req.url ?? "").split("?")[0] !== SANDBOX_LINK_PATH || PREVIEW_HOST.test(req.headers.host ?? "")) return false;
    socket.on("error", () => socket.destroy());
    void (async () => {
      const key = ServiceKey.safeParse(bearer(req));
      if (!key.success) throw apiError("UNAUTHENTICATED", "a sandbox link needs the sandbox's service key");
      const spare = upgrade === SANDBOX_SPARE_UPGRADE;
      const sandboxId = (spare && links.linkedBy(key.data)) || (await links.admit(key.data));
      if (!sandboxId) throw apiError("UNAUTHENTICATED", "invalid or revoked service key");
      if (!spare) return server.handleUpgrade(req, socket, head, (ws) => links.attach(sandboxId, ws));
      // A spare says nothing before it is taken: bytes sent with the upgrade are no spare's.
      if (head.length || !links.park(sandboxId, socket as Socket))
        throw apiError("CONFLICT", "this API process takes no spare connection of that sandbox now");
    })().catch((err) => refuseUpgrade(socket, err, logError));
    return true;
  };
}
