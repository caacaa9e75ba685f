import { bootstrapAdmin } from "./accounts/bootstrap.ts";
import { buildApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import { migrate } from "./db/migrate.ts";
import { openSql } from "./db/sql.ts";

const config = loadConfig();
const sql = await openSql({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir });
await migrate(sql);
const { app, services } = await buildApp({
  sql,
  dataDir: config.dataDir,
  publicUrl: config.publicUrl,
  repoAccess: config.repoAccess,
  secretsKey: config.secretsKey,
  bodyLimit: config.bodyLimit,
  logLevel: config.logLevel,
});
if (config.bootstrapTokenHash) await bootstrapAdmin(services, config.bootstrapTokenHash);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  app.log.info({ signal }, "shutting down");
  await app.close();
  await sql.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

await app.listen({ port: config.port, host: config.host });
