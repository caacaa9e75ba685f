import { Agent, createServer, type Server } from "node:http";
import httpProxy from "http-proxy";
import { apiError } from "../errors.ts";
import { writeError } from "../http/error-handler.ts";
import { linkHint } from "./link-hint.ts";
import { relayUpgrade } from "./upgrade-relay.ts";
import type { Upstreams } from "./upstreams.ts";

export type EdgeDeps = { upstreams: Upstreams };

const unavailable = apiError("UNAVAILABLE", "no API replica answers yet; try again shortly");

/**
 * The edge's server, not yet listening: plain requests, server-sent events and upgrades (exec and shell's own
 * protocol, previews' WebSockets, sandbox links; upgrade-relay.ts) pass through to a replica unchanged, Host header
 * included, so preview origins and git's smart HTTP work as they do on an API reached directly. A sandbox's link goes to the replica its URL names when that is one of
 * the replicas (link-hint.ts): the one that made the sandbox waits for it there, and only there is a warm-pool
 * member's key known. Any other hint, or none, goes to any replica, as every other request does.
 */
export function createEdge(deps: EdgeDeps): Server {
  const { upstreams } = deps;
  const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), xfwd: true, proxyTimeout: 0 });

  const server = createServer(async (req, res) => {
    const target = await upstreams.pick();
    if (!target) return void writeError(res, unavailable);
    proxy.web(req, res, { target }, (err) => {
      if ((err as NodeJS.ErrnoException).code === "ECONNREFUSED") upstreams.refused(target);
      writeError(res, unavailable);
    });
  });
  server.on("upgrade", async (req, socket, head) => {
    const hint = linkHint(req.url);
    const target = (hint && (await upstreams.replica(hint))) || (await upstreams.pick());
    if (!target) return void socket.destroy();
    relayUpgrade(req, socket, head, target, (err) => {
      if (err.code === "ECONNREFUSED") upstreams.refused(target);
    });
  });
  return server;
}
