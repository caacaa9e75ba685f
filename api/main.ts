import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { joinCluster } from "../orchestrator/cluster.ts";
import { connectSandboxBackend } from "../orchestrator/sandbox/backend.ts";
import type { SandboxNetwork } from "../orchestrator/sandbox/driver.ts";
import { packageRoot } from "../protocol/package-root.ts";
import { bootstrapAdmin } from "./accounts/bootstrap.ts";
import { buildApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import { migrate } from "./db/migrate.ts";
import { ensureInstallation, shippedTemplateFor } from "./db/pglite-template.ts";
import { openSql } from "./db/sql.ts";
import { cutMissingSessionBranches } from "./git/session-branches.ts";
import { createSandboxListener } from "./http/sandbox-listener.ts";
import { listenForSandboxesAt } from "./http/sandbox-socket.ts";
import { rotateOwnLog } from "./log-rotation.ts";
import { resolveBridgeHost } from "./sandbox-links/bridge-host.ts";

const MERGE_REPAIR_MS = 30_000;

// Files the API creates (PGlite's, git's objects and refs) are its owner's alone, whatever umask it was started with.
process.umask(0o077);
const config = loadConfig();
const pgliteData = config.databaseUrl ? undefined : shippedTemplateFor(config.pgliteDir);
const sql = await openSql({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir, pgliteData });
await migrate(sql);
await ensureInstallation(sql);
const o = config.orchestrator;
// Sandbox networks the driver finds or makes; the API listens on them unless it listens everywhere (below).
let onSandboxNetwork: (network: SandboxNetwork) => Promise<void> = async () => {};
const backend = o.enabled
  ? await connectSandboxBackend({
      baseImage: o.baseImage,
      driver: o.driver,
      linkSocketDir: o.linkSocketDir,
      networking:
        o.networking.kind === "shared"
          ? { kind: "shared", onNetwork: (network) => onSandboxNetwork(network) }
          : o.networking,
    })
  : undefined;
const { app, services } = await buildApp({
  sql,
  // Only daemons that dial out have bridges: with direct links the setting (compose mode sets `auto`) is not looked up.
  linkBridgeHost: o.sandboxLink === "dial-out" ? await resolveBridgeHost(o.linkBridgeHost) : undefined,
  dataDir: config.dataDir,
  publicUrl: config.publicUrl,
  previewDomain: config.previewDomain,
  trustedProxy: config.trustedProxy,
  repoAccess: config.repoAccess,
  repoAllowedHosts: config.repoAllowedHosts,
  secretsKey: config.secretsKey,
  orchestrator: backend && {
    ...backend,
    root: packageRoot(fileURLToPath(import.meta.url)),
    settings: {
      sessionCap: o.sessionCap,
      defaultAgent: "build",
      sandboxApiOrigin: o.sandboxApiOrigin,
      sandboxLink: o.sandboxLink,
      hostAlias: "host.docker.internal",
      provisionTimeoutMs: o.provisionTimeoutMs,
      limits: o.limits,
      llm: o.llm,
      poolSize: o.poolSize,
    },
  },
  plans: config.plans,
  apps: config.apps,
  bodyLimit: config.bodyLimit,
  gitMaxPushMb: config.gitMaxPushMb,
  logLevel: config.logLevel,
  cliBundle: config.cliBundle,
  slack: config.slack,
  oidc: config.oidc,
});
if (config.bootstrapTokenHash) await bootstrapAdmin(services, config.bootstrapTokenHash);
const log = (msg: string, extra?: Record<string, unknown>) => app.log.warn(extra ?? {}, msg);
if (pgliteData) app.log.info({ dir: config.pgliteDir }, "a new embedded database, copied from the bundle's template");
if (!backend) log("no Docker engine answered (or SVC_ORCHESTRATOR=off): sessions are unavailable");
const sandboxListener = createSandboxListener(
  app.server,
  () => (app.server.address() as AddressInfo).port,
  (msg, extra) => app.log.info(extra, msg),
);
// Listening on every address already covers the sandboxes' network; otherwise they get their own door.
if (backend && config.host !== "0.0.0.0" && config.host !== "::") {
  onSandboxNetwork = sandboxListener.bind;
  for (const existing of await backend.driver.networks(services.installationId))
    void sandboxListener.bind(existing).catch((err) => log("cannot listen for sandboxes", { error: String(err) }));
}
if (backend && o.networking.kind === "attached") {
  const joined = await backend.adopt(services.installationId);
  if (joined > 0) app.log.info({ networks: joined }, "joined the running sandboxes' networks");
}
// The embedded stack's logs/api.log (this process's stdout) keeps at most three files of 10 MB, as containers' do.
const stopLogRotation = rotateOwnLog((err) => log("could not rotate the log file", { error: err.message }));
const cluster = await joinCluster(sql, { instanceId: services.instanceId, log });
const stopBackground = services.startBackgroundWork({ cluster, idleMs: o.idleMs, disk: { limitMb: o.diskLimitMb } });
// Merges a crash interrupted between moving a base branch and recording it: settled before the first request, then
// every 30 s (those of a process of the cluster that has died since).
const stopMergeRepair = await services.changeRequests.startMergeRepair({
  isAlive: cluster.isAlive,
  project: (id) => services.projects.byId(id),
  log,
  everyMs: MERGE_REPAIR_MS,
});

// The link socket is opened once the API listens (below); a stop before that has none to close.
let stopSandboxSocket = () => {};
let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  app.log.info({ signal }, "shutting down");
  stopBackground();
  stopMergeRepair();
  stopLogRotation();
  sandboxListener.close();
  stopSandboxSocket();
  await app.close();
  await cluster.leave();
  await sql.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

await app.listen({ port: config.port, host: config.host });
if (backend && o.linkSocketDir) stopSandboxSocket = await listenForSandboxesAt(app.server, o.linkSocketDir);
// Sessions whose provisioning a crash cut off before their branch: given it, so a restart can boot them. In the
// background: an external repository may take a fetch to read.
void cutMissingSessionBranches({
  sql,
  repos: services.repos,
  project: (id) => services.projects.byId(id),
  isAlive: cluster.isAlive,
  log,
}).catch((err) => log("session branch repair failed", { error: String(err) }));
