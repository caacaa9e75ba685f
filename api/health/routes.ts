import type { FastifyInstance } from "fastify";
import type { ApiHealth } from "../../protocol/health.ts";
import type { Sql } from "../db/sql.ts";

export function healthRoutes(deps: { sql: Sql; version: string; modelConfigured: boolean }) {
  return async (app: FastifyInstance) => {
    app.get("/v1/health", { config: { auth: "public" } }, async (): Promise<ApiHealth> => {
      await deps.sql.query("select 1");
      return {
        status: "ok",
        version: deps.version,
        database: deps.sql.kind,
        model_configured: deps.modelConfigured,
      };
    });
  };
}
