import { fileURLToPath } from "node:url";
import { joinCluster } from "../orchestrator/cluster.ts";
import { dockerOrchestrator, startBackgroundWork } from "../orchestrator/start.ts";
import { packageRoot } from "../protocol/package-root.ts";
import { bootstrapAdmin } from "./accounts/bootstrap.ts";
import { buildApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import { migrate } from "./db/migrate.ts";
import { openSql } from "./db/sql.ts";

// Files the API creates (PGlite's, git's objects and refs) are its owner's alone, whatever umask it was started with.
process.umask(0o077);
const config = loadConfig();
const sql = await openSql({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir });
await migrate(sql);
const orchestrator = await dockerOrchestrator(config, packageRoot(fileURLToPath(import.meta.url)));
const { app, services } = await buildApp({
  sql,
  dataDir: config.dataDir,
  publicUrl: config.publicUrl,
  previewDomain: config.previewDomain,
  repoAccess: config.repoAccess,
  secretsKey: config.secretsKey,
  orchestrator,
  bodyLimit: config.bodyLimit,
  logLevel: config.logLevel,
});
if (config.bootstrapTokenHash) await bootstrapAdmin(services, config.bootstrapTokenHash);
const log = (msg: string, extra?: Record<string, unknown>) => app.log.warn(extra ?? {}, msg);
if (!orchestrator) log("no Docker engine answered (or SVC_ORCHESTRATOR=off): sessions are unavailable");
const cluster = await joinCluster(sql, { instanceId: services.instanceId, log });
const stopBackground = orchestrator
  ? startBackgroundWork(services, orchestrator, { idleMs: config.orchestrator.idleMs, cluster, log })
  : () => {};

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  app.log.info({ signal }, "shutting down");
  stopBackground();
  await app.close();
  await cluster.leave();
  await sql.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

await app.listen({ port: config.port, host: config.host });
