import { z } from "zod";
import { createEdge } from "./server.ts";
import { createUpstreams } from "./upstreams.ts";

/**
 * The compose stack's front door: the one published port, spread over the API replicas (`--scale api=N`) that
 * SVC_EDGE_UPSTREAM_HOST resolves to (server.ts).
 */
const Env = z.object({
  SVC_EDGE_PORT: z.coerce.number().int().min(1).max(65535).default(7700),
  SVC_EDGE_UPSTREAM_HOST: z.string().min(1).default("api"),
  SVC_EDGE_UPSTREAM_PORT: z.coerce.number().int().min(1).max(65535).default(7700),
});
const env = Env.parse(process.env);
const server = createEdge({ upstreams: createUpstreams(env.SVC_EDGE_UPSTREAM_HOST, env.SVC_EDGE_UPSTREAM_PORT) });
server.listen(env.SVC_EDGE_PORT, "0.0.0.0", () => {
  process.stdout.write(
    `${JSON.stringify({ level: 30, time: Date.now(), msg: "edge listening", port: env.SVC_EDGE_PORT, upstream: `${env.SVC_EDGE_UPSTREAM_HOST}:${env.SVC_EDGE_UPSTREAM_PORT}` })}\n`,
  );
});
for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => server.close(() => process.exit(0)));
