import { randomUUID } from "node:crypto";
import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { type BackgroundWorkOptions, createOrchestrator, type Orchestrator } from "../orchestrator/orchestrator.ts";
import { createTriggerScheduler } from "../orchestrator/triggers/scheduler.ts";
import { SESSION_CAP_DEFAULT } from "../protocol/stack-settings.ts";
import { createAccountStore } from "./accounts/store.ts";
import type { AppOptions } from "./app-options.ts";
import { appGrantKey } from "./apps/app-grant.ts";
import { APP_ENDPOINT_TTL_MS } from "./apps/app-host.ts";
import { createAppsPort } from "./apps/port.ts";
import { createAppService } from "./apps/service.ts";
import { createAppDeployStore } from "./apps/store.ts";
import { recordQueueMerge } from "./audit/queue-merges.ts";
import { createSignInAudit } from "./audit/sign-ins.ts";
import { createAuditLog } from "./audit/store.ts";
import { createTokenStore } from "./auth/token-store.ts";
import { startBackgroundWork } from "./background-work.ts";
import { createApprovalService } from "./change-requests/approvals.ts";
import { createApprovalStore } from "./change-requests/approvals-store.ts";
import { createCommentService } from "./change-requests/comments.ts";
import { createCrCommentStore } from "./change-requests/comments-store.ts";
import { createFeedback } from "./change-requests/feedback.ts";
import { createChangeRequestService } from "./change-requests/service.ts";
import { createChangeRequestStore } from "./change-requests/store.ts";
import { createChannelBridge } from "./channels/bridge.ts";
import { runTurn } from "./channels/session-turn.ts";
import { createSlackClient } from "./channels/slack-client.ts";
import { createChannelStore } from "./channels/store.ts";
import { createReviewState } from "./checks/review-state.ts";
import { createCheckStore } from "./checks/store.ts";
import { createBrowserSessions } from "./dashboard/browser-sessions.ts";
import { createEgress } from "./egress/port.ts";
import { createEvents } from "./events.ts";
import { createCloneCredentials } from "./git/clone-credentials.ts";
import { repoAccessToken } from "./git/github-app.ts";
import { installHooks } from "./git/hooks.ts";
import { createPreviewCache } from "./git/merge-preview.ts";
import { createRemoteAddressCheck } from "./git/remote-address.ts";
import { repoAccessAccounts } from "./git/repo-access-accounts.ts";
import { createRepositories } from "./git/repositories.ts";
import { createManifestReader } from "./manifest/reader.ts";
import { createInvites } from "./people/invites.ts";
import { createMembers } from "./people/members.ts";
import { createPasswordSignIn } from "./people/password-sign-in.ts";
import { createSignInLimiter } from "./people/rate-limit.ts";
import { createPlans, singlePlan } from "./plans/plans.ts";
import { createProjectStore } from "./projects/store.ts";
import { createSandboxLinks } from "./sandbox-links/registry.ts";
import { linkedUrlOf } from "./sandbox-links/rows.ts";
import { createCipher } from "./secrets/cipher.ts";
import { createSecretStore } from "./secrets/store.ts";
import { sandboxCheckpoint } from "./sessions/checkpoints.ts";
import { followSecretChanges } from "./sessions/secret-updates.ts";
import { createSessionService, SANDBOX_SERVICE_KEY_CONTEXT, type SandboxTarget } from "./sessions/service.ts";
import { createSessionStore } from "./sessions/store.ts";
import { createTranscriptStore } from "./sessions/transcript-store.ts";
import { createSso } from "./sso/sso.ts";
import { createTriggerPort } from "./triggers/port.ts";
import { createTriggerService } from "./triggers/service.ts";
import { createTriggerStore } from "./triggers/store.ts";
import { createTtlCache } from "./ttl-cache.ts";
import { createUsageStore } from "./usage/store.ts";

/** The project secret that authenticates the service to a private external repository. */
const PROJECT_REPO_TOKEN_SECRET = "GIT_ACCESS_TOKEN";

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
      tips: (project) => repos.tips(project, 0),
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
  const startWork = (work: BackgroundWorkOptions): (() => void) =>
    orchestrator
      ? startBackgroundWork(work, {
          orchestrator,
          triggerScheduler,
          sandboxLost: lostSandboxListeners,
          recorder: { sessions: sessionStore, openServiceKey, transcripts, events, log },
          checks: {
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
            instanceId,
            concurrency: CHECK_CONCURRENCY,
            log,
          },
        })
      : () => {};

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
    startBackgroundWork: startWork,
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
