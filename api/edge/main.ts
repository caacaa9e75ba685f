import { Agent, createServer } from "node:http";
import httpProxy from "http-proxy";
import { z } from "zod";
import { apiError } from "../errors.ts";
import { writeError } from "../http/error-handler.ts";
import { createUpstreams } from "./upstreams.ts";

/**
 * The compose stack's front door: the one published port, spread over the API replicas (`--scale api=N`). Plain
 * requests, server-sent events and upgrades (exec, shell, previews' WebSockets) pass through unchanged, Host header
 * included, so preview origins and git's smart HTTP work as they do on an API reached directly.
 */
const Env = z.object({
  SVC_EDGE_PORT: z.coerce.number().int().min(1).max(65535).default(7700),
  SVC_EDGE_UPSTREAM_HOST: z.string().min(1).default("api"),
  SVC_EDGE_UPSTREAM_PORT: z.coerce.number().int().min(1).max(65535).default(7700),
});
const env = Env.parse(process.env);
const upstreams = createUpstreams(env.SVC_EDGE_UPSTREAM_HOST, env.SVC_EDGE_UPSTREAM_PORT);
const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), xfwd: true, proxyTimeout: 0 });

const unavailable = apiError("UNAVAILABLE", "no API replica answers yet; try again shortly");

const server = createServer(async (req, res) => {
  const target = await upstreams.pick();
  if (!target) return void writeError(res, unavailable);
  proxy.web(req, res, { target }, (err) => {
    if ((err as NodeJS.ErrnoException).code === "ECONNREFUSED") upstreams.refused(target);
    writeError(res, unavailable);
  });
});
server.on("upgrade", async (req, socket, head) => {
  const target = await upstreams.pick();
  if (!target) return void socket.destroy();
  proxy.ws(req, socket, head, { target }, () => socket.destroy());
});
server.listen(env.SVC_EDGE_PORT, "0.0.0.0", () => {
  process.stdout.write(
    `${JSON.stringify({ level: 30, time: Date.now(), msg: "edge listening", port: env.SVC_EDGE_PORT, upstream: `${env.SVC_EDGE_UPSTREAM_HOST}:${env.SVC_EDGE_UPSTREAM_PORT}` })}\n`,
  );
});
for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => server.close(() => process.exit(0)));
