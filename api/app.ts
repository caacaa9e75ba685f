import Fastify, { type FastifyInstance, LogController } from "fastify";
import { accountRoutes } from "./accounts/routes.ts";
import { createAccountStore } from "./accounts/store.ts";
import { registerAuthentication } from "./auth/authenticate.ts";
import { createTokenStore } from "./auth/token-store.ts";
import type { Sql } from "./db/sql.ts";
import { healthRoutes } from "./health/routes.ts";
import { registerErrorHandler } from "./http/error-handler.ts";
import { projectRoutes } from "./projects/routes.ts";
import { createProjectStore } from "./projects/store.ts";
import { VERSION } from "./version.ts";

export type AppOptions = {
  sql: Sql;
  bodyLimit?: number;
  logLevel?: string;
};

/** Everything the routes need, built once from the database handle. */
export function createServices(sql: Sql) {
  return {
    sql,
    accounts: createAccountStore(sql),
    projects: createProjectStore(sql),
    tokens: createTokenStore(sql),
  };
}

export type Services = ReturnType<typeof createServices>;

export async function buildApp(options: AppOptions): Promise<{ app: FastifyInstance; services: Services }> {
  const app = Fastify({
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    logger: {
      level: options.logLevel ?? "info",
      // Tokens travel in this header; it must never reach a log line.
      redact: ["req.headers.authorization", 'req.headers["x-svc-user-context"]'],
    },
    // One line per request would dominate the log and the hot path; debug turns it back on.
    logController: new LogController({
      disableRequestLogging: options.logLevel !== "debug" && options.logLevel !== "trace",
    }),
  });
  const services = createServices(options.sql);
  registerErrorHandler(app);
  registerAuthentication(app, services);
  await app.register(healthRoutes({ sql: options.sql, version: VERSION }));
  await app.register(accountRoutes(services));
  await app.register(projectRoutes(services));
  return { app, services };
}
