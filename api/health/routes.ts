import type { FastifyInstance } from "fastify";
import type { HostAccessState } from "../../orchestrator/sandbox/driver.ts";
import type { ApiHealth } from "../../protocol/health.ts";
import type { Sql } from "../db/sql.ts";

export function healthRoutes(deps: {
  sql: Sql;
  version: string;
  modelConfigured: boolean;
  /** Whether the host's other ports are closed to sandboxes; absent without sandboxes, or when this process cannot
   * see the host's firewall (in a container). */
  hostFirewall?: HostAccessState;
}) {
  return async (app: FastifyInstance) => {
    app.get("/v1/health", { config: { auth: "public" } }, async (): Promise<ApiHealth> => {
      await deps.sql.query("select 1");
      return {
        status: "ok",
        version: deps.version,
        database: deps.sql.kind,
        model_configured: deps.modelConfigured,
        ...(deps.hostFirewall && {
          host_firewall: deps.hostFirewall.enforced
            ? { installed: true }
            : { installed: false, reason: deps.hostFirewall.reason },
        }),
      };
    });
  };
}
