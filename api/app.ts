import { createServer } from "node:http";
import Fastify, { type FastifyInstance, LogController } from "fastify";
import { createForwarder } from "../protocol/http-forward.ts";
import { GIT_MAX_PUSH_MB_DEFAULT } from "../protocol/stack-settings.ts";
import { VERSION } from "../protocol/version.ts";
import { accountRoutes } from "./accounts/routes.ts";
import { adoptRestoredData } from "./admin/restore.ts";
import { adminRoutes } from "./admin/routes.ts";
import type { AppOptions } from "./app-options.ts";
import { createAppHosts } from "./apps/app-host.ts";
import { appRoutes } from "./apps/routes.ts";
import { registerAudit } from "./audit/hook.ts";
import { auditRoutes } from "./audit/routes.ts";
import { registerAuthentication } from "./auth/authenticate.ts";
import { approvalRoutes } from "./change-requests/approvals-routes.ts";
import { commentRoutes } from "./change-requests/comments-routes.ts";
import { changeRequestRoutes } from "./change-requests/routes.ts";
import { channelRoutes } from "./channels/routes.ts";
import { dashboardRoutes } from "./dashboard/routes.ts";
import { signInLinkRoutes } from "./dashboard/sign-in-links.ts";
import { GIT_REQUEST_DEADLINE_MS } from "./git/http-backend.ts";
import { gitRoutes } from "./git/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { clientErrorHandler, frameworkErrors, registerErrorHandler } from "./http/error-handler.ts";
import { createLogger } from "./http/logger.ts";
import { trustedProxy } from "./http/trusted-proxy.ts";
import { registerInputChecks } from "./http/validate.ts";
import { createCliBundleSource, defaultCliBundlePath } from "./install/cli-bundle.ts";
import { installRoutes } from "./install/routes.ts";
import { peopleRoutes } from "./people/routes.ts";
import { planRoutes } from "./plans/routes.ts";
import { createPreviews } from "./previews/proxy.ts";
import { tunnelPreviews } from "./previews/tunnel.ts";
import { projectRoutes } from "./projects/routes.ts";
import { sandboxLinkUpgrade } from "./sandbox-links/upgrade.ts";
import { secretRoutes } from "./secrets/routes.ts";
import { createServices, type Services } from "./services.ts";
import { agentRoutes } from "./sessions/agent.ts";
import { sessionRoutes } from "./sessions/routes.ts";
import { execUpgrade, sandboxLogRoutes } from "./sessions/sandbox-access.ts";
import { transcriptRoutes } from "./sessions/transcript-routes.ts";
import { ssoRoutes } from "./sso/routes.ts";
import { triggerRoutes } from "./triggers/routes.ts";
import { usageRoutes } from "./usage/routes.ts";

/** The HTTP server over the services: its hosts (previews, apps, the egress proxy) first, then every route. */
export async function buildApp(options: AppOptions): Promise<{ app: FastifyInstance; services: Services }> {
  const logger = createLogger(options.logLevel);
  // Data `svc self-host restore` put here becomes an installation of its own before its id is read.
  await adoptRestoredData({
    sql: options.sql,
    dataDir: options.dataDir,
    log: (msg, extra) => logger.info(extra, msg),
  });
  const [installation] = await options.sql.query<{ id: string }>("select id from installation");
  const services = createServices(options, installation!.id, (msg, extra) => logger.warn(extra ?? {}, msg));
  // One keep-alive pool per sandbox for everything the API forwards to it.
  const forward = createForwarder();
  const previews = createPreviews(services, forward, (err) => logger.error({ err }, "preview failed"));
  const appHosts = createAppHosts(services, forward, (err) => logger.error({ err }, "app request failed"));
  // A sandbox's proxied plain-http requests (absolute URIs) and its CONNECTs are the egress proxy's, never a route's.
  const egressProxy = services.orchestrator && services.egressProxy;
  const proxy = options.trustedProxy ? trustedProxy(options.trustedProxy) : undefined;
  await proxy?.ready;
  const app = Fastify({
    loggerInstance: logger,
    ...(proxy ? { trustProxy: proxy.trust } : {}),
    // Preview hosts (`<port>-<session>.<domain>`) and app hosts own every path, so they are routed before Fastify.
    serverFactory: (handler) =>
      createServer((req, res) => {
        if (egressProxy?.owns(req)) return egressProxy.request(req, res);
        if (!previews.serveHost(req, res) && !appHosts.serveHost(req, res)) handler(req, res);
      }),
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    // The router's and the HTTP parser's own refusals answer in the catalogue's shape too.
    frameworkErrors,
    clientErrorHandler,
    // One line per request would dominate the log and the hot path; debug turns it back on.
    logController: new LogController({
      disableRequestLogging: options.logLevel !== "debug" && options.logLevel !== "trace",
    }),
  });
  app.addHook("onClose", async () => proxy?.stop());
  // Before the server closes, not after: an open link is an upgraded connection of the server, which would wait on it.
  app.addHook("preClose", async () => services.sandboxLinks.close());
  // A closing API takes its warm pool's sandboxes with it: nobody else could claim them.
  app.addHook("onClose", async () => services.orchestrator?.provisioner.stopPool());
  services.orchestrator?.provisioner.startPool();
  // Sandboxes reach this host's API port and model gateway, no other port of it, while this process runs.
  const hostFirewall = await services.orchestrator?.limitHost();
  if (hostFirewall && !hostFirewall.enforced)
    app.log.warn(
      { reason: hostFirewall.reason },
      "host firewall not installed: this stack's containers reach every port of this host",
    );
  app.addHook("onClose", async () => {
    await services.orchestrator
      ?.releaseHost()
      .catch((err) => app.log.warn({ error: String(err) }, "could not remove the host firewall"));
  });
  if (egressProxy) app.server.on("connect", (req, socket, head) => egressProxy.connect(req, socket, head));
  registerErrorHandler(app);
  registerInputChecks(app);
  registerAuthentication(app, services);
  registerAudit(app, services);
  await app.register(
    healthRoutes({
      sql: options.sql,
      version: VERSION,
      modelConfigured: Boolean(options.orchestrator?.settings.llm.baseUrl),
      hostFirewall,
    }),
  );
  await app.register(accountRoutes(services));
  await app.register(auditRoutes(services));
  await app.register(planRoutes(services));
  await app.register(usageRoutes(services));
  await app.register(peopleRoutes(services));
  await app.register(adminRoutes(services));
  await app.register(projectRoutes(services));
  await app.register(changeRequestRoutes(services));
  await app.register(commentRoutes(services));
  await app.register(approvalRoutes(services));
  await app.register(
    gitRoutes({
      ...services,
      maxPushMb: options.gitMaxPushMb ?? GIT_MAX_PUSH_MB_DEFAULT,
      requestDeadlineMs: options.gitRequestDeadlineMs ?? GIT_REQUEST_DEADLINE_MS,
    }),
  );
  await app.register(secretRoutes(services));
  await app.register(sessionRoutes(services));
  await app.register(transcriptRoutes(services));
  await app.register(triggerRoutes(services));
  await app.register(channelRoutes(services));
  await app.register(appRoutes(services));
  await app.register(signInLinkRoutes(services));
  const cliBundle = createCliBundleSource({
    path: options.cliBundle ?? defaultCliBundlePath(),
    log: (msg, extra) => app.log.warn(extra, msg),
  });
  await app.register(installRoutes({ publicUrl: services.publicUrl, cliBundle }));
  await app.register(dashboardRoutes(services, forward), { prefix: "/dashboard" });
  await app.register(ssoRoutes(services));
  await app.register(agentRoutes(services, forward));
  await app.register(sandboxLogRoutes(services));
  tunnelPreviews(app.server, previews.admit, services.sandboxLinks.spareSoon);
  const exec = execUpgrade(services, (err) => app.log.error({ err }, "exec failed"));
  const sandboxLink = sandboxLinkUpgrade(services.sandboxLinks, (err) => app.log.error({ err }, "sandbox link failed"));
  app.server.on(
    "upgrade",
    (req, socket, head) =>
      exec(req, socket, head) ||
      appHosts.upgrade(req, socket, head) ||
      sandboxLink(req, socket, head) ||
      previews.upgrade(req, socket, head),
  );
  return { app, services };
}
