import type { SandboxRecord } from "../../orchestrator/ports.ts";
import type { Provisioner } from "../../orchestrator/provisioning/provisioner.ts";
import type { ExecRequest, SandboxAccess } from "../../orchestrator/sandbox/access.ts";
import type { Project } from "../../protocol/project.ts";
import type { SandboxLinkMode } from "../../protocol/sandbox-link.ts";
import { type CreateSessionBody, STARTING_STATUSES } from "../../protocol/session.ts";
import { apiError } from "../errors.ts";
import type { Events } from "../events.ts";
import { refuseDefaultBranchLookalike } from "../git/branch-names.ts";
import type { PlanService } from "../plans/plans.ts";
import type { Cipher } from "../secrets/cipher.ts";
import type { createTtlCache } from "../ttl-cache.ts";
import { daemonExec } from "./daemon-exec.ts";
import { daemonLogs, type LogsOptions } from "./daemon-logs.ts";
import type { SessionRecord, SessionStore } from "./store.ts";

/**
 * How often a waiting request reads the session again without hearing of it: events are this process's own, and
 * behind a load balancer the session may be provisioned by another API process of the cluster.
 */
const WAIT_RECHECK_MS = 500;

/** Where previews and agent messages of a running session go: its daemon's address and service key. */
export type SandboxTarget = { projectId: string; url: string; serviceKey: string };

export type SessionSettings = {
  /** Concurrent live sessions per account when the stack has no plans (SVC_SESSION_CAP): api/plans/plans.ts. */
  sessionCap: number;
  defaultAgent: string;
  /**
   * SVC_SANDBOX_LINK. `dial-out`: commands run through the sandbox's daemon, over its link, for the engine that
   * runs the sandbox may be out of reach (a Swarm task on another node); `direct`: the engine's exec.
   */
  sandboxLink: SandboxLinkMode;
};

export type SessionServiceDeps = {
  store: SessionStore;
  provisioner: Provisioner;
  /** Logs of and commands in a session's sandbox. */
  access: SandboxAccess;
  settings: SessionSettings;
  /** Each account's session cap (its plan's, or its own) and the refusal that names it. */
  plans: Pick<PlanService, "capOf" | "refusal">;
  /** This API process (orchestrator/cluster.ts): recorded on the sessions it provisions. */
  instanceId: string;
  /** Opens sealed service keys; without it sandboxes cannot be reached. */
  cipher: Cipher | undefined;
  /**
   * Every request of a previewed page needs its sandbox's address and key, which change only when the sandbox
   * is replaced: the provisioner drops an entry then (this process), the TTL bounds it across processes.
   */
  sandboxTargets: ReturnType<typeof createTtlCache<string, SandboxTarget>>;
  /** `session.changed` (the store emits it) wakes the requests that wait for a session to start. */
  events: Events;
  /** The project's branch tips as they are now; undefined when its repository cannot be reached. */
  tips: (project: Project) => Promise<Map<string, string> | undefined>;
};

export const SANDBOX_SERVICE_KEY_CONTEXT = "sandbox-service-key";

/** The user-facing session lifecycle: create within the account's cap, read, stop, restart, remove. */
export function createSessionService(deps: SessionServiceDeps) {
  const { store, provisioner, settings } = deps;

  async function load(project: Project, sessionId: string): Promise<SessionRecord> {
    const session = await store.get(project.id, sessionId);
    if (!session) throw apiError("SESSION_NOT_FOUND", `session ${sessionId} not found in this project`);
    return session;
  }

  /** The running session's live sandbox; anything else is the one error every call into a sandbox gives. */
  async function liveSandbox(project: Project, sessionId: string): Promise<SandboxRecord & { url: string }> {
    const session = await load(project, sessionId);
    const sandbox = await store.currentSandbox(session.session_id);
    if (session.status !== "running" || !sandbox?.url || sandbox.status !== "active") {
      const hint =
        session.status === "provisioning" ? "wait until it runs" : `'svc sessions restart ${session.session_id}'`;
      throw apiError("SESSION_NOT_RUNNING", `session ${session.session_id} is ${session.status}; ${hint}`);
    }
    return { ...sandbox, url: sandbox.url };
  }

  async function containerOf(project: Project, sessionId: string): Promise<string> {
    const sandbox = await liveSandbox(project, sessionId);
    if (!sandbox.container_id) throw apiError("SESSION_NOT_RUNNING", `session ${sessionId} has no sandbox yet`);
    return sandbox.container_id;
  }

  async function loadSandboxTarget(project: Project, sessionId: string): Promise<SandboxTarget> {
    const sandbox = await liveSandbox(project, sessionId);
    const sealed = await store.sealedServiceKey(sandbox.sandbox_id);
    if (!sealed || !deps.cipher)
      throw apiError("NOT_CONFIGURED", "reaching a sandbox needs the server's secrets key (SVC_SECRETS_KEY)");
    return {
      projectId: project.id,
      url: sandbox.url,
      serviceKey: deps.cipher.decrypt(sealed, SANDBOX_SERVICE_KEY_CONTEXT),
    };
  }

  return {
    /**
     * `trigger`: the slug of the manifest trigger that spawns it (recorded on the session). `branch`: an existing
     * branch it works on and pushes to (a CR's head), instead of one cut for it from the base. `check`: the sandbox
     * of a CR's check, its branch cut at `check.startSha` (the commit the check runs on), never listed.
     */
    async create(
      project: Project,
      body: CreateSessionBody,
      userId: string,
      options: { trigger?: string; branch?: string; check?: { startSha: string } } = {},
    ): Promise<SessionRecord> {
      const baseRef = body.base_ref ?? project.default_branch;
      refuseDefaultBranchLookalike(project, baseRef, "base_ref");
      // A base named by the caller is checked before anything is made: a typo is a 400, not a session that fails.
      // An unreachable repository is left to provisioning, which says so on the session.
      if (baseRef !== project.default_branch) {
        const tips = await deps.tips(project);
        if (tips && !tips.has(baseRef))
          throw apiError("BRANCH_NOT_FOUND", `branch '${baseRef}' does not exist`, { field: "base_ref" });
      }
      const agentName = body.agent ?? settings.defaultAgent;
      // A pooled sandbox is made for a branch of its own.
      const cap = await deps.plans.capOf(project.account_id);
      const pooled = options.branch
        ? undefined
        : provisioner.reservePooled(project, { baseRef, agent: agentName, model: body.model ?? null });
      const created = await store
        .createWithinCap({
          sessionId: pooled,
          accountId: project.account_id,
          projectId: project.id,
          baseRef,
          agentName,
          agentModel: body.model ?? null,
          initialPrompt: body.prompt ?? null,
          createdBy: userId,
          trigger: options.trigger ?? null,
          cap: cap.session_cap,
          provisioner: deps.instanceId,
          branch: options.branch,
          purpose: options.check ? "check" : "agent",
        })
        .catch((err) => {
          if (pooled) provisioner.releasePooled(pooled);
          throw err;
        });
      if ("current" in created) {
        if (pooled) provisioner.releasePooled(pooled);
        throw deps.plans.refusal(cap, created.current);
      }
      void provisioner.provision(project, created.session, {
        cutBranch: !options.branch,
        startSha: options.check?.startSha,
        commandsOnly: options.check !== undefined,
      });
      return created.session;
    },

    list: (project: Project) => store.list(project.id),

    get: load,

    /**
     * The session once it is no longer starting (STARTING_STATUSES) or, with `progress`, once its progress line is
     * another one (empty: none); else as it is when `timeoutMs` have passed or `signal` aborts. Woken by
     * `session.changed`, it reads the row once more per change, never on a timer.
     */
    async waitStarted(
      project: Project,
      sessionId: string,
      options: { timeoutMs: number; progress?: string; signal: AbortSignal },
    ): Promise<SessionRecord> {
      const { timeoutMs, progress, signal } = options;
      const deadline = Date.now() + timeoutMs;
      let changed = false;
      let wake = () => {};
      // Subscribed before the first read: a change between the read and the wait is never missed.
      const off = deps.events.on("session.changed", (e) => {
        if (e.sessionId !== sessionId) return;
        changed = true;
        wake();
      });
      try {
        for (;;) {
          changed = false;
          const session = await load(project, sessionId);
          const started = !STARTING_STATUSES.includes(session.status);
          const moved = progress !== undefined && (session.progress ?? "") !== progress;
          if (started || moved || signal.aborted || Date.now() >= deadline) return session;
          if (changed) continue;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(done, Math.min(deadline - Date.now(), WAIT_RECHECK_MS));
            signal.addEventListener("abort", done, { once: true });
            wake = done;
            function done() {
              clearTimeout(timer);
              signal.removeEventListener("abort", done);
              wake = () => {};
              resolve();
            }
          });
        }
      } finally {
        off();
      }
    },

    projectOf: (sessionId: string) => store.projectOf(sessionId),

    async sandboxTarget(project: Project, sessionId: string): Promise<SandboxTarget> {
      const cached = await deps.sandboxTargets.get(sessionId, () => loadSandboxTarget(project, sessionId));
      // A cached target of another project's session: answer as for a fresh lookup (not found).
      return cached.projectId === project.id ? cached : loadSandboxTarget(project, sessionId);
    },

    /** The sandbox's log (entrypoint, daemon, agent), secrets masked; `follow` until it stops or `signal`. */
    async logs(project: Project, sessionId: string, options: LogsOptions) {
      const container = await containerOf(project, sessionId);
      // Over the link when there is one; a sandbox still starting, or whose daemon is gone, has the engine's log.
      const target =
        settings.sandboxLink === "dial-out"
          ? await loadSandboxTarget(project, sessionId).catch(() => undefined)
          : undefined;
      const served = target && (await daemonLogs(target, options));
      return deps.access.logs(container, options, served);
    },

    /** What masks the sandbox's secrets and credentials in what it printed. */
    async masker(project: Project, sessionId: string) {
      return deps.access.masker(await containerOf(project, sessionId));
    },

    /** Runs a command in the sandbox's workspace as its own user. */
    async exec(project: Project, sessionId: string, request: ExecRequest) {
      if (settings.sandboxLink === "dial-out") return daemonExec(await loadSandboxTarget(project, sessionId), request);
      return deps.access.exec(await containerOf(project, sessionId), request);
    },

    async stop(project: Project, sessionId: string): Promise<SessionRecord> {
      const session = await load(project, sessionId);
      await store.transition(session.session_id, ["provisioning", "running"], "stopped");
      await provisioner.stopSandboxOf(session.session_id);
      return (await store.get(project.id, sessionId))!;
    },

    /**
     * Re-provision in place: same branch, fresh sandbox, fresh project token (the old one stops working). Also what
     * wakes a stopped (hibernated) or failed session, so it takes a slot of the cap as a create does: the cap is
     * checked, and the session moved to `provisioning`, in one transaction before any sandbox is touched; a refusal
     * leaves the session and its sandbox as they were.
     */
    async restart(project: Project, sessionId: string): Promise<SessionRecord> {
      const session = await load(project, sessionId);
      const cap = await deps.plans.capOf(session.account_id);
      const moved = await store.restartWithinCap({
        sessionId: session.session_id,
        accountId: session.account_id,
        from: ["provisioning", "running", "stopped", "failed"],
        cap: cap.session_cap,
        provisioner: deps.instanceId,
      });
      if (moved === undefined) {
        const now = await load(project, sessionId);
        throw apiError("CONFLICT", `session ${now.session_id} is ${now.status} and cannot be restarted`);
      }
      if ("current" in moved) throw deps.plans.refusal(cap, moved.current);
      await provisioner.stopSandboxOf(session.session_id);
      void provisioner.provision(project, moved.session, { cutBranch: false });
      return moved.session;
    },

    async remove(project: Project, sessionId: string): Promise<void> {
      const session = await load(project, sessionId);
      await store.transition(session.session_id, ["provisioning", "running"], "stopped");
      await provisioner.stopSandboxOf(session.session_id);
      await store.remove(session.session_id);
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
