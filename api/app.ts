import { randomUUID } from "node:crypto";
import { chmodSync, mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import Fastify, { type FastifyInstance, LogController } from "fastify";
import { type BackgroundWorkOptions, createOrchestrator, type Orchestrator } from "../orchestrator/orchestrator.ts";
import type { ProvisionerSettings } from "../orchestrator/provisioning/provisioner.ts";
import type { SandboxDriver } from "../orchestrator/sandbox/driver.ts";
import { createTriggerScheduler } from "../orchestrator/triggers/scheduler.ts";
import { createForwarder } from "../protocol/http-forward.ts";
import { GIT_MAX_PUSH_MB_DEFAULT, SESSION_CAP_DEFAULT } from "../protocol/stack-settings.ts";
import { VERSION } from "../protocol/version.ts";
import { accountRoutes } from "./accounts/routes.ts";
import { createAccountStore } from "./accounts/store.ts";
import { adoptRestoredData } from "./admin/restore.ts";
import { adminRoutes } from "./admin/routes.ts";
import { appGrantKey } from "./apps/app-grant.ts";
import { APP_ENDPOINT_TTL_MS, createAppHosts } from "./apps/app-host.ts";
import { createAppsPort } from "./apps/port.ts";
import { appRoutes } from "./apps/routes.ts";
import { createAppService } from "./apps/service.ts";
import { createAppDeployStore } from "./apps/store.ts";
import { registerAudit } from "./audit/hook.ts";
import { recordQueueMerge } from "./audit/queue-merges.ts";
import { auditRoutes } from "./audit/routes.ts";
import { createSignInAudit } from "./audit/sign-ins.ts";
import { createAuditLog } from "./audit/store.ts";
import { registerAuthentication } from "./auth/authenticate.ts";
import { createTokenStore } from "./auth/token-store.ts";
import { createApprovalService } from "./change-requests/approvals.ts";
import { approvalRoutes } from "./change-requests/approvals-routes.ts";
import { createApprovalStore } from "./change-requests/approvals-store.ts";
import { createCommentService } from "./change-requests/comments.ts";
import { commentRoutes } from "./change-requests/comments-routes.ts";
import { createCrCommentStore } from "./change-requests/comments-store.ts";
import { createFeedback } from "./change-requests/feedback.ts";
import { changeRequestRoutes } from "./change-requests/routes.ts";
import { createChangeRequestService } from "./change-requests/service.ts";
import { createChangeRequestStore } from "./change-requests/store.ts";
import { createChannelBridge } from "./channels/bridge.ts";
import { channelRoutes } from "./channels/routes.ts";
import { runTurn } from "./channels/session-turn.ts";
import { createSlackClient, type SlackSettings } from "./channels/slack-client.ts";
import { createChannelStore } from "./channels/store.ts";
import { createReviewState } from "./checks/review-state.ts";
import { startCheckScheduler } from "./checks/scheduler.ts";
import { createCheckStore } from "./checks/store.ts";
import { createBrowserSessions } from "./dashboard/browser-sessions.ts";
import { dashboardRoutes } from "./dashboard/routes.ts";
import { signInLinkRoutes } from "./dashboard/sign-in-links.ts";
import type { Sql } from "./db/sql.ts";
import { createEgress } from "./egress/port.ts";
import { createEvents } from "./events.ts";
import { createCloneCredentials } from "./git/clone-credentials.ts";
import { type GitHubApp, repoAccessToken } from "./git/github-app.ts";
import { installHooks } from "./git/hooks.ts";
import { GIT_REQUEST_DEADLINE_MS } from "./git/http-backend.ts";
import { createPreviewCache } from "./git/merge-preview.ts";
import { createRemoteAddressCheck } from "./git/remote-address.ts";
import { repoAccessAccounts } from "./git/repo-access-accounts.ts";
import { createRepositories } from "./git/repositories.ts";
import { gitRoutes } from "./git/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { clientErrorHandler, frameworkErrors, registerErrorHandler } from "./http/error-handler.ts";
import { createLogger } from "./http/logger.ts";
import { trustedProxy } from "./http/trusted-proxy.ts";
import { registerInputChecks } from "./http/validate.ts";
import { createCliBundleSource, defaultCliBundlePath } from "./install/cli-bundle.ts";
import { installRoutes } from "./install/routes.ts";
import { createManifestReader } from "./manifest/reader.ts";
import { createInvites } from "./people/invites.ts";
import { createMembers } from "./people/members.ts";
import { createPasswordSignIn } from "./people/password-sign-in.ts";
import { createSignInLimiter } from "./people/rate-limit.ts";
import { peopleRoutes } from "./people/routes.ts";
import { createPlans, type PlanCatalogue, singlePlan } from "./plans/plans.ts";
import { planRoutes } from "./plans/routes.ts";
import { createPreviews } from "./previews/proxy.ts";
import { tunnelPreviews } from "./previews/tunnel.ts";
import { projectRoutes } from "./projects/routes.ts";
import { createProjectStore } from "./projects/store.ts";
import { createSandboxLinks } from "./sandbox-links/registry.ts";
import { linkedUrlOf } from "./sandbox-links/rows.ts";
import { sandboxLinkUpgrade } from "./sandbox-links/upgrade.ts";
import { createCipher } from "./secrets/cipher.ts";
import { secretRoutes } from "./secrets/routes.ts";
import { createSecretStore } from "./secrets/store.ts";
import { agentRoutes } from "./sessions/agent.ts";
import { sandboxCheckpoint } from "./sessions/checkpoints.ts";
import { sessionRoutes } from "./sessions/routes.ts";
import { execUpgrade, sandboxLogRoutes } from "./sessions/sandbox-access.ts";
import { followSecretChanges } from "./sessions/secret-updates.ts";
import {
  createSessionService,
  SANDBOX_SERVICE_KEY_CONTEXT,
  type SandboxTarget,
  type SessionSettings,
} from "./sessions/service.ts";
import { createSessionStore } from "./sessions/store.ts";
import { recordTranscripts } from "./sessions/transcript-recorder.ts";
import { transcriptRoutes } from "./sessions/transcript-routes.ts";
import { createTranscriptStore } from "./sessions/transcript-store.ts";
import type { OidcSettings } from "./sso/provider.ts";
import { ssoRoutes } from "./sso/routes.ts";
import { createSso } from "./sso/sso.ts";
import { createTriggerPort } from "./triggers/port.ts";
import { triggerRoutes } from "./triggers/routes.ts";
import { createTriggerService } from "./triggers/service.ts";
import { createTriggerStore } from "./triggers/store.ts";
import { createTtlCache } from "./ttl-cache.ts";
import { usageRoutes } from "./usage/routes.ts";
import { createUsageStore } from "./usage/store.ts";

/** The project secret that authenticates the service to a private external repository. */
export const PROJECT_REPO_TOKEN_SECRET = "GIT_ACCESS_TOKEN";

export type AppOptions = {
  sql: Sql;
  /** The proxy in front (SVC_TRUSTED_PROXY): its X-Forwarded-For's last hop is the client's address. */
  trustedProxy?: string;
  /** Repositories, mirrors and git hooks live here. */
  dataDir: string;
  /** Origin under which this API is reachable (clone URLs are built from it); a function when known late. */
  publicUrl: string | (() => string);
  /** `accounts`: whom it serves (SVC_REPO_ACCESS_ACCOUNTS, slugs or ids); undefined: the admin's own accounts. */
  repoAccess?: { token: string | undefined; url: string; app?: GitHubApp; accounts?: string[] };
  /** Repository hosts (`host`, `host:port`) allowed whatever they resolve to (SVC_REPO_ALLOWED_HOSTS); default none. */
  repoAllowedHosts?: string[];
  /** Base64 AES-256 key for project secrets; without it the secrets API answers 503. */
  secretsKey?: string;
  /** Sessions run only when a sandbox driver is given. */
  orchestrator?: {
    driver: SandboxDriver;
    settings: SandboxSettings;
    /** Package root (images/sandbox, dist/sandbox) and the image the sandbox image builds on. */
    root: string;
    baseImage: string;
  };
  bodyLimit?: number;
  /** The largest git push accepted, in MB (SVC_GIT_MAX_PUSH_MB); default that setting's. */
  gitMaxPushMb?: number;
  /** How long one git request (clone, fetch, push) may run before its git processes are ended; default GIT_REQUEST_DEADLINE_MS. */
  gitRequestDeadlineMs?: number;
  logLevel?: string;
  /** Serve previews at `<port>-<session>.<domain>`; default `localhost` when the public URL is on loopback. */
  previewDomain?: string;
  /** This API process among those sharing the database (orchestrator/cluster.ts); default a fresh uuid. */
  instanceId?: string;
  /** The CLI file /install.sh installs; default this package's build (dist/sandbox/svc.mjs). */
  cliBundle?: string;
  /** Slack app credentials (svc channels); without a signing secret the events endpoint answers 503. */
  slack?: SlackSettings;
  /** Where `[[apps]]` deploy (SVC_APP_PROVIDER): local containers beside the sandboxes, or nowhere (default). */
  apps?: { provider: "local" | "none"; healthTimeoutMs?: number; resyncMs?: number };
  /** The stack's plans (SVC_PLANS, SVC_DEFAULT_PLAN); default one plan capped at the sandbox settings' sessionCap. */
  plans?: PlanCatalogue;
  /** Single sign-on through an OpenID Connect provider (SVC_OIDC_*); without it the sign-in page offers none. */
  oidc?: OidcSettings;
  /**
   * The address sandbox bridges listen on (SVC_LINK_BRIDGE_HOST, resolved at start): default loopback; in a stack,
   * this replica's address on the stack's network, where the other replicas reach its bridges.
   */
  linkBridgeHost?: string;
};

export type SandboxSettings = ProvisionerSettings & SessionSettings;

const SANDBOX_TARGET_TTL_MS = 2000;
/** Checks run at once by the leader, each in a sandbox of its own. */
const CHECK_CONCURRENCY = 2;

/** Everything the routes need, built once from the database handle and the data directory. */
export function createServices(
  options: AppOptions,
  installationId: string,
  log: (msg: string, extra?: Record<string, unknown>) => void,
) {
  const { sql } = options;
  // Repositories, mirrors and hooks: only the owner may enter the data directory, whatever the umask was.
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  chmodSync(options.dataDir, 0o700);
  const instanceId = options.instanceId ?? randomUUID();
  const publicUrl = () =>
    (typeof options.publicUrl === "function" ? options.publicUrl() : options.publicUrl).replace(/\/+$/, "");

  const events = createEvents(log);
  const tokens = createTokenStore(sql);
  const cipher = options.secretsKey ? createCipher(options.secretsKey) : undefined;
  const secrets = createSecretStore(sql, cipher);
  const checkRepoUrl = createRemoteAddressCheck({ allowedHosts: options.repoAllowedHosts ?? [] });
  const repos = createRepositories({
    dataDir: options.dataDir,
    repoAccessToken: repoAccessToken(options.repoAccess),
    repoAccessUrl: options.repoAccess?.url,
    repoAccessServes: repoAccessAccounts(sql, options.repoAccess?.accounts),
    checkRemote: checkRepoUrl,
    projectAccessToken: async (projectId) =>
      cipher ? (await secrets.values(projectId)).values[PROJECT_REPO_TOKEN_SECRET] : undefined,
    onFetched: (projectId) => events.emit("repo.fetched", { projectId }),
  });
  const manifests = createManifestReader({ repos, sql });
  const projects = createProjectStore(sql, (id) => `${publicUrl()}/git/${id}.git`);
  const accounts = createAccountStore(sql);
  const audit = createAuditLog(sql);
  const signInAudit = createSignInAudit({ audit, accounts });
  const plans = createPlans({
    sql,
    catalogue: options.plans ?? singlePlan(options.orchestrator?.settings.sessionCap ?? SESSION_CAP_DEFAULT),
  });
  const invites = createInvites({ sql, publicUrl });
  const members = createMembers({ sql, invites });
  const passwordSignIn = createPasswordSignIn({ sql, limiter: createSignInLimiter(sql) });
  const previews = createPreviewCache();
  const checkRuns = createCheckStore(sql);
  const approvalStore = createApprovalStore(sql);
  const review = createReviewState({ checks: checkRuns, approvals: approvalStore, manifests, repos, previews });
  const crStore = createChangeRequestStore(sql);
  const changeRequests = createChangeRequestService({
    store: crStore,
    repos,
    previews,
    events,
    instanceId,
    review,
  });
  const triggerStore = createTriggerStore(sql);
  const sessionStore = createSessionStore(sql, events);
  const transcripts = createTranscriptStore(sql);
  // `[sandbox] egress`: which sandboxes go out through the proxy, and the proxy (on the API's port) that enforces it.
  const egress = createEgress({
    sessions: sessionStore,
    projects,
    manifests,
    llmBaseUrl: options.orchestrator?.settings.llm.baseUrl,
    log,
  });
  const sandboxTargets = createTtlCache<string, SandboxTarget>(SANDBOX_TARGET_TTL_MS);
  const lostSandboxListeners = new Set<() => void>();
  // Daemons that dial out (SVC_SANDBOX_LINK=dial-out) link to this process; a link's bridge is its sandbox's URL.
  const sandboxLinks = createSandboxLinks({
    sandboxByKey: async (hash) => (await sessionStore.liveSandboxByKey(hash))?.sandbox_id,
    // A link that reached another replica: the waiting one finds the URL that replica recorded.
    linkedUrl: linkedUrlOf(sql),
    bridgeHost: options.linkBridgeHost,
    // A sandbox adopted after a restart links to this process's bridge, a new port: its row follows it there.
    onLinked: (sandboxId, url) =>
      void sessionStore
        .updateSandbox(sandboxId, { url })
        .catch((err) => log("could not record a sandbox's link", { sandbox: sandboxId, error: String(err) })),
    onUnlinked: () => {
      for (const listener of lostSandboxListeners) listener();
    },
    log,
  });
  const appDeploys = createAppDeployStore(sql);
  const appEndpoints = createTtlCache<string, string | undefined>(APP_ENDPOINT_TTL_MS);

  /** A sandbox's service key, unsealed: how this server opens a sandbox's daemon (none without SVC_SECRETS_KEY). */
  const openServiceKey = cipher && ((sealed: string) => cipher.decrypt(sealed, SANDBOX_SERVICE_KEY_CONTEXT));

  /** A project's secrets as its sandboxes get them. */
  const sandboxSecrets = {
    revision: secrets.revision,
    async values(projectId: string) {
      const { values, revision } = await secrets.values(projectId);
      // The remote's credential serves the API's git endpoint, which relays a sandbox's pushes: never the sandbox.
      return {
        revision,
        values: Object.fromEntries(Object.entries(values).filter(([name]) => name !== PROJECT_REPO_TOKEN_SECRET)),
      };
    },
  };

  /** The orchestrator's ports, implemented by this API's stores. */
  function composeOrchestrator(o: NonNullable<AppOptions["orchestrator"]>): Orchestrator {
    return createOrchestrator({
      driver: o.driver,
      root: o.root,
      baseImage: o.baseImage,
      settings: o.settings,
      installationId,
      instanceId,
      records: sessionStore,
      tokens: {
        mint: ({ userId, projectId, sessionId }) =>
          tokens.mint({ userId, projectId, sessionId, name: `session ${sessionId}` }),
        revoke: (tokenId) => tokens.revoke(tokenId),
      },
      secrets: sandboxSecrets,
      repos: {
        gitDir: (project) => repos.open(project, 0),
        tips: (project) => repos.tips(project, 0),
        createBranch: (project, branch, sha) => repos.createBranch(project, branch, sha),
      },
      sealServiceKey: (key) => cipher?.encrypt(key, SANDBOX_SERVICE_KEY_CONTEXT) ?? null,
      egress: egress.port,
      links: sandboxLinks,
      onSandboxClosed: (sessionId) => sandboxTargets.delete(sessionId),
      checkpoint: openServiceKey && sandboxCheckpoint({ sessions: sessionStore, openServiceKey }),
      apps:
        options.apps?.provider === "local"
          ? {
              port: createAppsPort({ store: appDeploys, projects, manifests, triggers: triggerStore }),
              onSwitched: (projectId, app) => appEndpoints.delete(`${projectId}/${app}`),
              healthTimeoutMs: options.apps.healthTimeoutMs,
              resyncMs: options.apps.resyncMs,
            }
          : undefined,
      log,
    });
  }

  const orchestrator = options.orchestrator && composeOrchestrator(options.orchestrator);
  const sessions =
    orchestrator &&
    createSessionService({
      store: sessionStore,
      provisioner: orchestrator.provisioner,
      access: orchestrator.access,
      settings: options.orchestrator!.settings,
      plans,
      instanceId,
      cipher,
      sandboxTargets,
      events,
    });
  const crComments = createCrCommentStore(sql);
  // Prompts for a CR's agent (review comments, `svc cr resolve`): only where sessions run.
  const feedback =
    sessions &&
    createFeedback({
      sessions,
      sessionStore,
      transcripts,
      earlierSession: (cr) => crComments.feedbackSession(cr.cr_id, cr.head_ref),
      log,
    });
  const comments = createCommentService({ changeRequests, store: crComments, repos, accounts, feedback });
  const approvals = createApprovalService({ changeRequests, store: approvalStore, events });
  const triggers = createTriggerService({
    store: triggerStore,
    manifests,
    repos,
    changeRequests,
    sessions,
    instanceId,
  });
  const triggerPort = createTriggerPort({ store: triggerStore, projects, manifests, triggers });
  // Made here, not by the orchestrator: a firing creates a session, and the session service needs the orchestrator.
  const triggerScheduler = createTriggerScheduler({ port: triggerPort, log });
  if (orchestrator) {
    // A default branch that may have moved: its manifest's triggers and apps are read again.
    const reloadTriggers = (projectId: string) => {
      void triggerScheduler.reload(projectId).catch((err) => log("trigger reload failed", { error: String(err) }));
      void orchestrator.apps?.sync(projectId).catch((err) => log("app sync failed", { error: String(err) }));
      // On a standby the reload does nothing: refreshing the stored manifest is what tells the leader.
      void projects
        .byId(projectId)
        .then((project) => project && manifests.read(project))
        .catch((err) => log("manifest refresh failed", { error: String(err) }));
    };
    events.on("repo.pushed", ({ projectId }) => reloadTriggers(projectId));
    events.on("repo.fetched", ({ projectId }) => reloadTriggers(projectId));
    events.on("change-request.changed", ({ project, change }) => {
      if (change === "merged") reloadTriggers(project.id);
    });
  }
  if (sessions) followSecretChanges({ events, projects, secrets: sandboxSecrets, sessions, store: sessionStore, log });

  /** The orchestrator's background work and the trigger scheduler; without an orchestrator nothing runs or fires. */
  function startBackgroundWork(work: BackgroundWorkOptions): () => void {
    if (!orchestrator) return () => {};
    const stopOrchestrator = orchestrator.startBackgroundWork({
      ...work,
      onSandboxLost: (listener) => {
        lostSandboxListeners.add(listener);
        return () => lostSandboxListeners.delete(listener);
      },
    });
    void triggerScheduler.start(work.cluster.lead);
    const stopRecorder = recordTranscripts({
      lead: work.cluster.lead,
      sessions: sessionStore,
      openServiceKey,
      transcripts,
      events,
      log,
    });
    const stopChecks = startCheckScheduler({
      store: checkRuns,
      crStore,
      changeRequests,
      review,
      manifests,
      projects,
      runner: {
        store: checkRuns,
        sessions: sessions!,
        repos,
        previews,
        startTimeoutMs: options.orchestrator!.settings.provisionTimeoutMs,
        log,
      },
      async sendToAgent(project, cr, prompt) {
        const handoff = await feedback!.handOff(project, cr, prompt, cr.created_by);
        handoff.deliver(async () => {});
      },
      events,
      recordMerge: recordQueueMerge(audit),
      lead: work.cluster.lead,
      isAlive: work.cluster.isAlive,
      instanceId,
      concurrency: CHECK_CONCURRENCY,
      log,
    });
    return () => {
      stopOrchestrator();
      triggerScheduler.stop();
      stopRecorder();
      stopChecks();
    };
  }

  const slack = options.slack ?? { apiUrl: "https://slack.com/api" };
  const channelStore = createChannelStore(sql);
  const channels = createChannelBridge({
    store: channelStore,
    slack: createSlackClient(slack, log),
    projects,
    accounts,
    sessions,
    runTurn: (project, sessionId, text) => runTurn({ sessions: sessions!, transcripts }, project, sessionId, text),
    events,
    publicUrl,
    log,
  });
  // Previews always have hosts of their own: `*.localhost` resolves to loopback in browsers and curl by itself.
  const previewDomain = () => options.previewDomain ?? "localhost";
  const appGrants = options.secretsKey ? appGrantKey(options.secretsKey) : undefined;
  const apps = createAppService({
    store: appDeploys,
    manifests,
    deployer: () => orchestrator?.apps,
    publicUrl,
    previewDomain,
    grantKey: appGrants,
  });
  return {
    sql,
    publicUrl,
    previewDomain,
    appGrants,
    repos,
    checkRepoUrl,
    installationId,
    instanceId,
    orchestrator,
    sessions,
    reposDir: join(options.dataDir, "repos"),
    hooksDir: installHooks(options.dataDir),
    accounts,
    audit,
    signInAudit,
    plans,
    usage: createUsageStore(sql),
    invites,
    members,
    passwordSignIn,
    projects,
    tokens,
    cloneCredentials: createCloneCredentials(sql),
    secrets,
    changeRequests,
    comments,
    approvals,
    feedback,
    manifests,
    triggers,
    triggerPort,
    triggerScheduler,
    startBackgroundWork,
    apps,
    appDeploys,
    appEndpoints,
    sessionStore,
    transcripts,
    egressProxy: egress.proxy,
    sandboxLinks,
    browserSessions: createBrowserSessions(sql),
    sso: options.oidc && createSso({ sql, settings: options.oidc, publicUrl, signInAudit }),
    events,
    slack,
    channelStore,
    channels,
  };
}

export type Services = ReturnType<typeof createServices>;

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
