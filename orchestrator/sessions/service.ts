import type { TokenStore } from "../../api/auth/token-store.ts";
import { apiError } from "../../api/errors.ts";
import type { Repositories } from "../../api/git/repositories.ts";
import type { Cipher } from "../../api/secrets/cipher.ts";
import type { SecretStore } from "../../api/secrets/store.ts";
import { createTtlCache } from "../../api/ttl-cache.ts";
import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { DaemonHealth } from "../../protocol/daemon.ts";
import { SANDBOX_SERVICE_PORT } from "../../protocol/env.ts";
import type { Project } from "../../protocol/project.ts";
import type { CreateSessionBody } from "../../protocol/session.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { resolveSessionImage } from "../images/project-image.ts";
import { ImageBuildError } from "../sandbox/docker-driver.ts";
import type { SandboxDriver } from "../sandbox/driver.ts";
import { hostUrlForSandbox, sandboxEnv } from "./sandbox-env.ts";
import type { SandboxRecord, SessionRecord, SessionStore } from "./store.ts";

export type OrchestratorSettings = {
  /** Concurrent live sessions per account. */
  sessionCap: number;
  /** The API origin as sandboxes reach it, e.g. http://host.docker.internal:7700. */
  sandboxApiOrigin: string;
  hostAlias: string;
  provisionTimeoutMs: number;
  limits: { memoryBytes: number; nanoCpus: number; pids: number };
  llm: { baseUrl?: string; apiKey?: string; model?: string };
  defaultAgent: string;
};

export type SessionDeps = {
  store: SessionStore;
  tokens: TokenStore;
  secrets: SecretStore;
  repos: Repositories;
  driver: SandboxDriver;
  /** Resolves the platform sandbox image (built once, then cached). */
  platformImage: () => Promise<string>;
  settings: OrchestratorSettings;
  /** This installation's id (one per database): its sandboxes are labelled with it. */
  installationId: string;
  /** This API process (cluster.ts): recorded on the sessions it provisions. */
  instanceId: string;
  /** Seals the sandbox service key at rest; without it previews are unavailable. */
  cipher: Cipher | undefined;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

export type SandboxTarget = { projectId: string; url: string; serviceKey: string };
const SANDBOX_TARGET_TTL_MS = 2000;

export const SANDBOX_LABEL = "dev.svc.sandbox";
export const INSTALLATION_LABEL = "dev.svc.installation";
export const SESSION_LABEL = "dev.svc.session";
export const PROJECT_LABEL = "dev.svc.project";

/** Live means the daemon answers and the workspace is cloned: a session is not `running` on an empty sandbox. */
async function waitLive(url: string, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/svc/health`, { signal: AbortSignal.timeout(1000) });
      const health = DaemonHealth.safeParse(res.ok ? await res.json() : undefined);
      if (health.success) {
        const { state, error } = health.data.repo;
        if (state === "cloned" || state === "disabled") return;
        if (state === "failed") throw new Error(`the sandbox could not clone the repository: ${error}`);
      }
    } catch (err) {
      if ((err as Error).message.startsWith("the sandbox could not clone")) throw err;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("the sandbox did not become live before the provisioning deadline");
}

export function createSessionService(deps: SessionDeps) {
  const { store, driver, settings } = deps;
  // Sessions this process is provisioning right now: the reconciler leaves them alone.
  const inFlight = new Set<string>();
  // Every request of a previewed page needs its sandbox's address and key, which change only when the sandbox is
  // replaced: this process forgets them then, and other processes within the TTL.
  const sandboxTargets = createTtlCache<string, SandboxTarget>(SANDBOX_TARGET_TTL_MS);

  /** Everything one sandbox needs, then the container; any failure leaves the session `failed` and no container. */
  /** Runs in the background of a request: it never rejects (a closing database included); the reconciler fixes the rest. */
  async function provision(project: Project, session: SessionRecord, options: { cutBranch: boolean }): Promise<void> {
    inFlight.add(session.session_id);
    try {
      await provisionSandbox(project, session, options);
    } catch (err) {
      deps.log("provisioning could not record its outcome", {
        session: session.session_id,
        error: (err as Error).message,
      });
    } finally {
      inFlight.delete(session.session_id);
    }
  }

  async function provisionSandbox(
    project: Project,
    session: SessionRecord,
    options: { cutBranch: boolean },
  ): Promise<void> {
    const deadline = Date.now() + settings.provisionTimeoutMs;
    let sandboxId: string | undefined;
    let containerId: string | undefined;
    let tokenId: string | undefined;
    try {
      const gitDir = await deps.repos.open(project, 0);
      const tips = await deps.repos.tips(project, 0);
      const baseSha = tips?.get(session.base_ref);
      if (!baseSha) throw new Error(`base branch '${session.base_ref}' not found`);
      if (options.cutBranch && !(await deps.repos.createBranch(project, session.branch, baseSha))) {
        throw new Error(`could not create branch '${session.branch}'`);
      }
      const headSha = (await deps.repos.tips(project, 0))?.get(session.branch) ?? baseSha;
      const token = await deps.tokens.mint({
        userId: session.created_by,
        projectId: project.id,
        name: `session ${session.session_id}`,
      });
      tokenId = token.id;
      const serviceKey = newSecret(SERVICE_KEY_PREFIX);
      sandboxId = await store.insertSandbox({
        sessionId: session.session_id,
        projectId: project.id,
        serviceKeyHash: hashSecret(serviceKey),
        serviceKeySealed: deps.cipher?.encrypt(serviceKey, "sandbox-service-key") ?? null,
        tokenId: token.id,
      });
      const image = await resolveSessionImage(driver, {
        gitDir,
        commit: headSha,
        platformImage: await deps.platformImage(),
      });
      await store.updateSandbox(sandboxId, { image });
      const secrets = await deps.secrets.values(project.id);
      const repoUrl =
        project.repo_kind === "managed"
          ? `${settings.sandboxApiOrigin}/git/${project.id}.git`
          : hostUrlForSandbox(project.repo_url ?? "", settings.hostAlias);
      const env = sandboxEnv({
        project,
        session,
        repoUrl,
        apiOrigin: settings.sandboxApiOrigin,
        serviceKey,
        cliToken: token.token,
        secrets: secrets.values,
        secretsRevision: secrets.revision,
        llm: {
          ...settings.llm,
          baseUrl: settings.llm.baseUrl ? hostUrlForSandbox(settings.llm.baseUrl, settings.hostAlias) : undefined,
        },
      });
      containerId = await driver.create({
        name: `svc-${session.session_id.slice(0, 8)}-${sandboxId.slice(0, 8)}`,
        image,
        env,
        labels: {
          [INSTALLATION_LABEL]: deps.installationId,
          [SANDBOX_LABEL]: sandboxId,
          [SESSION_LABEL]: session.session_id,
          [PROJECT_LABEL]: project.id,
        },
        servicePort: SANDBOX_SERVICE_PORT,
        limits: settings.limits,
      });
      await store.updateSandbox(sandboxId, { containerId });
      const info = await driver.start(containerId);
      if (!info.hostPort) throw new Error("the sandbox's daemon port was not published");
      const url = `http://127.0.0.1:${info.hostPort}`;
      await store.updateSandbox(sandboxId, { url });
      await waitLive(url, deadline);
      await store.updateSandbox(sandboxId, { status: "active" });
      if (
        !(await store.transition(session.session_id, ["provisioning"], "running", { sandboxUrl: url, error: null }))
      ) {
        // Stopped or removed while it booted: the sandbox must not outlive that decision.
        await teardownSandbox(sandboxId, containerId, tokenId, "stopped");
      }
    } catch (err) {
      // A failed image build keeps the end of its log with the error: that is what the user needs to fix it.
      const message =
        err instanceof ImageBuildError
          ? `${err.message}\n${err.log.trim().split("\n").slice(-30).join("\n")}`.slice(-8000)
          : (err as Error).message;
      deps.log("provisioning failed", { session: session.session_id, error: message });
      if (sandboxId) await store.updateSandbox(sandboxId, { status: "error", error: message });
      await teardownSandbox(sandboxId, containerId, tokenId, "error").catch(() => {});
      await store.transition(session.session_id, ["provisioning"], "failed", { error: message });
    }
  }

  async function teardownSandbox(
    sandboxId: string | undefined,
    containerId: string | null | undefined,
    tokenId: string | null | undefined,
    status: "stopped" | "error",
  ): Promise<void> {
    if (containerId) await driver.remove(containerId);
    if (tokenId) await deps.tokens.revoke(tokenId);
    if (sandboxId) await store.updateSandbox(sandboxId, { status });
  }

  async function stopSandboxOf(sessionId: string): Promise<void> {
    sandboxTargets.delete(sessionId);
    const sandbox = await store.currentSandbox(sessionId);
    if (sandbox && (sandbox.status === "active" || sandbox.status === "provisioning")) {
      await teardownSandbox(sandbox.sandbox_id, sandbox.container_id, sandbox.token_id, "stopped");
    }
  }

  async function loadSandboxTarget(project: Project, sessionId: string): Promise<SandboxTarget> {
    const session = await load(project, sessionId);
    const sandbox = await store.currentSandbox(session.session_id);
    if (session.status !== "running" || !sandbox?.url || sandbox.status !== "active") {
      const hint =
        session.status === "provisioning" ? "wait until it runs" : `'svc sessions restart ${session.session_id}'`;
      throw apiError("SESSION_NOT_RUNNING", `session ${session.session_id} is ${session.status}; ${hint}`);
    }
    const sealed = await store.sealedServiceKey(sandbox.sandbox_id);
    if (!sealed || !deps.cipher)
      throw apiError("NOT_CONFIGURED", "reaching a sandbox needs the server's secrets key (SVC_SECRETS_KEY)");
    return { projectId: project.id, url: sandbox.url, serviceKey: deps.cipher.decrypt(sealed, "sandbox-service-key") };
  }

  async function load(project: Project, sessionId: string): Promise<SessionRecord> {
    const session = await store.get(project.id, sessionId);
    if (!session) throw apiError("SESSION_NOT_FOUND", `session ${sessionId} not found in this project`);
    return session;
  }

  return {
    isProvisioning: (sessionId: string) => inFlight.has(sessionId),

    /** Tears a sandbox down for the reconciler or the sweeper; a session still marked running becomes stopped. */
    async closeSandbox(sandbox: SandboxRecord, status: "stopped" | "error", reason: string): Promise<void> {
      sandboxTargets.delete(sandbox.session_id);
      await teardownSandbox(sandbox.sandbox_id, sandbox.container_id, sandbox.token_id, status);
      if (status === "error") await store.updateSandbox(sandbox.sandbox_id, { error: reason });
      await store.transition(sandbox.session_id, ["running"], "stopped", {
        error: reason === "idle" ? undefined : reason,
      });
    },

    async create(project: Project, body: CreateSessionBody, userId: string): Promise<SessionRecord> {
      const created = await store.createWithinCap({
        accountId: project.account_id,
        projectId: project.id,
        baseRef: body.base_ref ?? project.default_branch,
        agentName: body.agent ?? settings.defaultAgent,
        agentModel: body.model ?? null,
        initialPrompt: body.prompt ?? null,
        createdBy: userId,
        cap: settings.sessionCap,
        provisioner: deps.instanceId,
      });
      if ("current" in created) {
        throw apiError("SESSION_CAP_REACHED", `this account may run ${settings.sessionCap} sessions at once`, {
          limit: settings.sessionCap,
          current: created.current,
        });
      }
      void provision(project, created.session, { cutBranch: true });
      return created.session;
    },

    list: (project: Project) => store.list(project.id),

    /** A running session's daemon address and service key: where previews and agent messages go. */
    async sandboxTarget(project: Project, sessionId: string): Promise<SandboxTarget> {
      const cached = await sandboxTargets.get(sessionId, () => loadSandboxTarget(project, sessionId));
      // A cached target of another project's session: answer as for a fresh lookup (not found).
      return cached.projectId === project.id ? cached : loadSandboxTarget(project, sessionId);
    },
    get: load,

    async stop(project: Project, sessionId: string): Promise<SessionRecord> {
      const session = await load(project, sessionId);
      await store.transition(session.session_id, ["provisioning", "running"], "stopped");
      await stopSandboxOf(session.session_id);
      return (await store.get(project.id, sessionId))!;
    },

    /** Re-provision in place: same branch, fresh sandbox, fresh project token (the old one stops working). */
    async restart(project: Project, sessionId: string): Promise<SessionRecord> {
      const session = await load(project, sessionId);
      await stopSandboxOf(session.session_id);
      await store.transition(session.session_id, ["provisioning", "running", "stopped", "failed"], "provisioning", {
        error: null,
        sandboxUrl: null,
        provisioner: deps.instanceId,
      });
      const fresh = (await store.get(project.id, sessionId))!;
      void provision(project, fresh, { cutBranch: false });
      return fresh;
    },

    async remove(project: Project, sessionId: string): Promise<void> {
      const session = await load(project, sessionId);
      await store.transition(session.session_id, ["provisioning", "running"], "stopped");
      await stopSandboxOf(session.session_id);
      await store.remove(session.session_id);
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
