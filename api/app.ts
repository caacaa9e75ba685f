import { join } from "node:path";
import Fastify, { type FastifyInstance, LogController } from "fastify";
import { accountRoutes } from "./accounts/routes.ts";
import { createAccountStore } from "./accounts/store.ts";
import { registerAuthentication } from "./auth/authenticate.ts";
import { createTokenStore } from "./auth/token-store.ts";
import { changeRequestRoutes } from "./change-requests/routes.ts";
import { createChangeRequestService } from "./change-requests/service.ts";
import { createChangeRequestStore } from "./change-requests/store.ts";
import type { Sql } from "./db/sql.ts";
import { createCloneCredentials } from "./git/clone-credentials.ts";
import { installHooks } from "./git/hooks.ts";
import { createPreviewCache } from "./git/merge-preview.ts";
import { createRepositories } from "./git/repositories.ts";
import { gitRoutes } from "./git/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { registerErrorHandler } from "./http/error-handler.ts";
import { projectRoutes } from "./projects/routes.ts";
import { createProjectStore } from "./projects/store.ts";
import { VERSION } from "./version.ts";

export type AppOptions = {
  sql: Sql;
  /** Repositories, mirrors and git hooks live here. */
  dataDir: string;
  /** Origin under which this API is reachable (clone URLs are built from it); a function when known late. */
  publicUrl: string | (() => string);
  repoAccess?: { token: string | undefined; url: string };
  bodyLimit?: number;
  logLevel?: string;
};

/** Everything the routes need, built once from the database handle and the data directory. */
export function createServices(options: AppOptions) {
  const { sql } = options;
  const publicUrl = () =>
    (typeof options.publicUrl === "function" ? options.publicUrl() : options.publicUrl).replace(/\/+$/, "");
  const repos = createRepositories({
    dataDir: options.dataDir,
    repoAccessToken: options.repoAccess?.token,
    repoAccessUrl: options.repoAccess?.url,
  });
  return {
    sql,
    repos,
    reposDir: join(options.dataDir, "repos"),
    hooksDir: installHooks(options.dataDir),
    accounts: createAccountStore(sql),
    projects: createProjectStore(sql, (id) => `${publicUrl()}/git/${id}.git`),
    tokens: createTokenStore(sql),
    cloneCredentials: createCloneCredentials(sql),
    changeRequests: createChangeRequestService({
      store: createChangeRequestStore(sql),
      repos,
      previews: createPreviewCache(),
    }),
  };
}

export type Services = ReturnType<typeof createServices>;

export async function buildApp(options: AppOptions): Promise<{ app: FastifyInstance; services: Services }> {
  const app = Fastify({
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    logger: {
      level: options.logLevel ?? "info",
      // Tokens travel in these headers; they must never reach a log line.
      redact: ["req.headers.authorization", 'req.headers["x-svc-user-context"]'],
    },
    // One line per request would dominate the log and the hot path; debug turns it back on.
    logController: new LogController({
      disableRequestLogging: options.logLevel !== "debug" && options.logLevel !== "trace",
    }),
  });
  const services = createServices(options);
  registerErrorHandler(app);
  registerAuthentication(app, services);
  await app.register(healthRoutes({ sql: options.sql, version: VERSION }));
  await app.register(accountRoutes(services));
  await app.register(projectRoutes(services));
  await app.register(changeRequestRoutes(services));
  await app.register(gitRoutes(services));
  return { app, services };
}
