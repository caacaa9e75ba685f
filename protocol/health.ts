import { z } from "zod";

export const ApiHealth = z.object({
  status: z.literal("ok"),
  version: z.string(),
  database: z.enum(["pglite", "postgres"]),
  /**
   * Sandboxes this server starts get a model gateway (SVC_LLM_BASE_URL); without one no agent can answer. Always
   * sent; optional so that a newer CLI still takes an older server's health (`svc self-host start` waits on it).
   */
  model_configured: z.boolean().optional(),
  /**
   * Whether sandboxes reach only the API's and the model gateway's ports of this host (a firewall chain the API
   * installs); why not when not. Absent on a server that runs no sandboxes, and on one in a container (compose
   * mode), which cannot see the host's firewall: the CLI that starts the stack installs it and checks it.
   */
  host_firewall: z.object({ installed: z.boolean(), reason: z.string().optional() }).optional(),
});
export type ApiHealth = z.infer<typeof ApiHealth>;
