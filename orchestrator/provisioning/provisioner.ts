import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { CLAIMED_ENV, SANDBOX_SERVICE_PORT, SandboxEnv } from "../../protocol/env.ts";
import { hostUrlForSandbox } from "../../protocol/host-firewall.ts";
import type { Project } from "../../protocol/project.ts";
import { redact } from "../../protocol/redact.ts";
import type { SandboxLinkMode } from "../../protocol/sandbox-link.ts";
import { plainText } from "../../protocol/terminal-text.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { OrchestratorError } from "../errors.ts";
import { resolveSessionImage } from "../images/project-image.ts";
import type {
  EgressPort,
  Log,
  RepositoryPort,
  SandboxLinkPort,
  SandboxRecord,
  SandboxRecords,
  SealPort,
  SecretsPort,
  SessionToProvision,
  TokenPort,
} from "../ports.ts";
import type { SandboxDriver, SandboxEgress, SandboxLimits } from "../sandbox/driver.ts";
import type { PoolMember } from "./pool-members.ts";
import { egressProxyUrl, sandboxEnv } from "./sandbox-env.ts";
import { sandboxReach } from "./sandbox-reach.ts";
import { waitLive } from "./wait-live.ts";
import { createWarmPool, type WarmPoolDeps } from "./warm-pool.ts";

const POOL_IDLE_MS = 30 * 60_000;
const POOL_TICK_MS = 5000;

export type ProvisionerSettings = {
  /** The API origin as sandboxes reach it, e.g. http://host.docker.internal:7700. */
  sandboxApiOrigin: string;
  hostAlias: string;
  provisionTimeoutMs: number;
  limits: SandboxLimits;
  llm: { baseUrl?: string; apiKey?: string; model?: string; timeoutS?: number };
  /** The agent a session gets when it names none: the one pooled sandboxes are made for. */
  defaultAgent: string;
  /** Warm sandboxes kept per project with recent sessions (SVC_POOL_SIZE); 0 or absent: none. */
  poolSize?: number;
  /** How the API reaches daemons (SVC_SANDBOX_LINK); `dial-out` needs `links` in the deps. */
  sandboxLink: SandboxLinkMode;
};

/**
 * `cutBranch`: the session's branch is made for it, at the base's tip or at `startSha` (a check's commit); a pooled
 * sandbox still serves, its workspace at the base until the session fetches its branch.
 */
export type ProvisionOptions = {
  cutBranch: boolean;
  startSha?: string;
  /** A sandbox that only runs commands (a CR's check): a cold one starts no agent runtime. */
  commandsOnly?: boolean;
};

export type ProvisionerDeps = {
  records: SandboxRecords;
  tokens: TokenPort;
  secrets: SecretsPort;
  repos: RepositoryPort;
  sealServiceKey: SealPort;
  /** Whether a project's sandboxes go out only through the API's egress proxy. */
  egress: EgressPort;
  /** The links daemons dial in on, for `settings.sandboxLink` dial-out. */
  links?: SandboxLinkPort;
  driver: SandboxDriver;
  /** Resolves the platform sandbox image (built once, then cached). */
  platformImage: () => Promise<string>;
  settings: ProvisionerSettings;
  /** This installation's id (one per database): its sandboxes are owned by it. */
  installationId: string;
  /** This API process (cluster.ts): its warm pool's containers carry it. */
  instanceId: string;
  /** Told whenever a session's sandbox goes away, so callers drop what they cached about it. */
  onSandboxClosed: (sessionId: string) => void;
  /**
   * Asks a running sandbox to save its unsaved work (its daemon's /svc/checkpoint) before it is stopped; the API
   * holds the key that opens it. Absent: nothing is saved.
   */
  checkpoint?: (sandbox: SandboxRecord & { url: string }) => Promise<void>;
  log: Log;
};

/** A failed image build keeps the end of the failing step's output and what to do: what the user needs to fix it. */
function describeFailure(err: unknown): string {
  if (!(err instanceof OrchestratorError)) return (err as Error).message;
  const output = err.log.trim().split("\n").slice(-20).join("\n").slice(-6000);
  return [err.message, output, err.hint].filter(Boolean).join("\n");
}

/** A build step as the session's progress shows it: `building image: step 2/5 RUN make`, one short line. */
const buildStep = (step: string) => {
  const line = `building image: step ${step.replace(/\s+/g, " ")}`;
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
};

/**
 * Turns a `provisioning` session into a running sandbox (branch, token, sandbox row, image, container, live
 * daemon) and tears sandboxes down again. Session rows are the API's; this only moves them through `records`.
 */
export function createProvisioner(deps: ProvisionerDeps) {
  const { records, driver, settings } = deps;
  // Sessions this process is provisioning right now: the reconciler leaves them alone.
  const inFlight = new Set<string>();
  const reach = sandboxReach(settings.sandboxLink, settings.sandboxApiOrigin, deps.links);

  const envFor: WarmPoolDeps["envFor"] = (project, session, credentials, egress) =>
    sandboxEnv({
      project,
      session,
      // External repositories too: the API relays fetches and the session branch's pushes, with a credential the
      // sandbox never holds.
      repoUrl: `${settings.sandboxApiOrigin}/git/${project.id}.git`,
      apiOrigin: settings.sandboxApiOrigin,
      serviceKey: credentials.serviceKey,
      cliToken: credentials.cliToken,
      secrets: credentials.secrets.values,
      secretsRevision: credentials.secrets.revision,
      llm: {
        ...settings.llm,
        baseUrl: settings.llm.baseUrl ? hostUrlForSandbox(settings.llm.baseUrl, settings.hostAlias) : undefined,
      },
      proxy: egress === "proxy" ? egressProxyUrl(settings.sandboxApiOrigin, credentials.serviceKey) : undefined,
      linkUrl: reach.linkUrl,
    });

  /** A project's list sends its sandboxes through the API's proxy; without one, the driver says how they go out. */
  const egressOf = async (project: Project): Promise<SandboxEgress> =>
    (await deps.egress.proxied(project)) ? "proxy" : driver.unlistedEgress();

  const pool = createWarmPool({
    driver,
    egressOf,
    repos: deps.repos,
    secrets: deps.secrets,
    platformImage: deps.platformImage,
    envFor,
    reach,
    settings: {
      size: settings.poolSize ?? 0,
      idleMs: POOL_IDLE_MS,
      tickMs: POOL_TICK_MS,
      readyTimeoutMs: settings.provisionTimeoutMs,
      defaultAgent: settings.defaultAgent,
      defaultModel: settings.llm.model,
      limits: settings.limits,
    },
    installationId: deps.installationId,
    instanceId: deps.instanceId,
    log: deps.log,
  });

  /** Hands a reserved pool sandbox to its session: the session's credentials and prompt, and nothing else, go in. */
  async function claim(member: PoolMember, env: Record<string, string>): Promise<void> {
    const res = await fetch(`${member.url}/svc/claim`, {
      method: "POST",
      headers: { authorization: `Bearer ${member.serviceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ env: Object.fromEntries(CLAIMED_ENV.filter((n) => env[n]).map((n) => [n, env[n]!])) }),
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok) throw new Error(`the pooled sandbox refused its claim (${res.status}): ${await res.text()}`);
  }

  async function provisionSandbox(
    project: Project,
    session: SessionToProvision,
    options: ProvisionOptions,
  ): Promise<void> {
    const deadline = Date.now() + settings.provisionTimeoutMs;
    let sandboxId: string | undefined;
    let containerId: string | undefined;
    let tokenId: string | undefined;
    // Docker and git quote what they were given (env, URLs) in their errors: none of it is stored or logged.
    const credentials: string[] = [settings.llm.apiKey ?? ""];
    // What `svc sessions new` shows while it waits, written in order and never holding provisioning up.
    let progressWritten = Promise.resolve();
    const progress = (step: string) => {
      progressWritten = progressWritten
        .then(() => records.setProgress(session.session_id, redact(step, credentials)))
        .catch(() => {});
    };
    const finish = async (url: string) => {
      await waitLive(url, deadline, progress);
      await progressWritten;
      await records.updateSandbox(sandboxId!, { status: "active" });
      if (
        !(await records.transition(session.session_id, ["provisioning"], "running", { sandboxUrl: url, error: null }))
      ) {
        // Stopped or removed while it booted: the sandbox must not outlive that decision.
        await teardown(sandboxId, containerId, tokenId, "stopped");
      }
    };
    // The pooled sandbox reserved for this session is out of the pool from here: any failure (the session deleted
    // meanwhile, its base gone) removes it with the rest, as it would a cold one.
    let member = options.cutBranch ? pool.take(session.session_id) : undefined;
    containerId = member?.containerId;
    try {
      const gitDir = await deps.repos.gitDir(project);
      const tips = await deps.repos.tips(project);
      const baseSha = tips?.get(session.base_ref);
      if (!baseSha) throw new Error(`base branch '${session.base_ref}' not found`);
      const secrets = await deps.secrets.values(project.id);
      credentials.push(...Object.values(secrets.values));
      const egress = await egressOf(project);
      // A pooled sandbox serves only if it still holds this base and these secrets; else it goes, and a cold one
      // is made for the same session id.
      if (member && (member.baseSha !== baseSha || member.secretsRevision !== secrets.revision)) {
        await pool.discard(member);
        member = undefined;
        containerId = undefined;
      }
      if (options.cutBranch && !(await deps.repos.createBranch(project, session.branch, options.startSha ?? baseSha))) {
        throw new Error(`could not create branch '${session.branch}'`);
      }
      const token = await deps.tokens.mint({
        userId: session.created_by,
        projectId: project.id,
        sessionId: session.session_id,
      });
      tokenId = token.id;
      const serviceKey = member?.serviceKey ?? newSecret(SERVICE_KEY_PREFIX);
      credentials.push(token.token, serviceKey);
      sandboxId = await records.insertSandbox({
        sessionId: session.session_id,
        projectId: project.id,
        serviceKeyHash: hashSecret(serviceKey),
        serviceKeySealed: deps.sealServiceKey(serviceKey),
        tokenId: token.id,
        sandboxId: member?.sandboxId,
      });
      // A pooled sandbox's key was announced when the pool made it.
      if (!member) reach.expect(serviceKey, sandboxId);
      const env = envFor(project, session, { serviceKey, cliToken: token.token, secrets }, egress);
      if (options.commandsOnly) env[SandboxEnv.agentRuntime] = "0";
      if (member) {
        // Its container, so a stop meanwhile removes it; its URL only once claimed: a link waited for in the cold
        // sandbox's place reads the row's URL as another replica's endpoint, and a dead member's would be taken.
        await records.updateSandbox(sandboxId, { image: member.image, containerId: member.containerId });
        const refused = await claim(member, env).then(
          () => undefined,
          (err: unknown) => err,
        );
        if (!refused) {
          await records.updateSandbox(sandboxId, { url: member.url });
          await finish(member.url);
          return;
        }
        // It died or stopped answering after the pool's last look: it goes, and the session starts cold instead.
        deps.log("pooled sandbox not claimable; starting a new one", {
          session: session.session_id,
          error: redact(describeFailure(refused), credentials),
        });
        await pool.discard(member);
        member = undefined;
        containerId = undefined;
      }
      progress("preparing the sandbox image");
      // The default branch's .svc/, never the session's branch or base: an agent's edit of it is not built.
      const image = await resolveSessionImage(driver, {
        gitDir,
        branch: project.default_branch,
        commit: tips?.get(project.default_branch),
        platformImage: await deps.platformImage(),
        sandbox: { owner: { installationId: deps.installationId, sandboxId }, limits: settings.limits },
        onStep: (step) => progress(buildStep(step)),
      });
      await records.updateSandbox(sandboxId, { image });
      progress("starting sandbox");
      containerId = await driver.create({
        name: `svc-${session.session_id.slice(0, 8)}-${sandboxId.slice(0, 8)}`,
        image,
        env,
        owner: {
          installationId: deps.installationId,
          sandboxId,
          sessionId: session.session_id,
          projectId: project.id,
        },
        servicePort: SANDBOX_SERVICE_PORT,
        limits: settings.limits,
        egress,
      });
      await records.updateSandbox(sandboxId, { containerId });
      const info = await driver.start(containerId);
      const url = await reach.endpoint(sandboxId, info, deadline, "the sandbox's daemon");
      await records.updateSandbox(sandboxId, { url });
      await finish(url);
    } catch (err) {
      // Read by browsers and pipes: plain text, whatever the engine, git or the sandbox printed.
      const message = plainText(redact(describeFailure(err), credentials));
      deps.log("provisioning failed", { session: session.session_id, error: message });
      await progressWritten;
      if (sandboxId) await records.updateSandbox(sandboxId, { status: "error", error: message });
      await teardown(sandboxId, containerId, tokenId, "error").catch(() => {});
      await records.transition(session.session_id, ["provisioning"], "failed", { error: message });
    }
  }

  /** A live sandbox's unsaved work to its checkpoint ref; a sandbox that cannot is stopped all the same. */
  async function checkpoint(sandbox: SandboxRecord): Promise<void> {
    if (sandbox.status !== "active" || !sandbox.url || !deps.checkpoint) return;
    await deps
      .checkpoint({ ...sandbox, url: sandbox.url })
      .catch((err: Error) =>
        deps.log("could not save the sandbox's unsaved work", { session: sandbox.session_id, error: err.message }),
      );
  }

  async function teardown(
    sandboxId: string | undefined,
    containerId: string | null | undefined,
    tokenId: string | null | undefined,
    status: "stopped" | "error",
  ): Promise<void> {
    // Credentials die first: a container the engine fails to remove must not keep a working token or link.
    if (sandboxId) reach.forget(sandboxId);
    if (tokenId) await deps.tokens.revoke(tokenId);
    if (sandboxId) await records.updateSandbox(sandboxId, { status });
    if (containerId) await driver.remove(containerId);
  }

  return {
    isProvisioning: (sessionId: string) => inFlight.has(sessionId),

    /** The session id of a ready pooled sandbox reserved for a new session that fits it (warm-pool.ts). */
    reservePooled: pool.reserve,
    releasePooled: pool.release,
    startPool: pool.start,
    stopPool: pool.stop,

    /**
     * Everything one sandbox needs, then the container; any failure leaves the session `failed` and no container.
     * Runs in the background of a request: it never rejects (a closing database included); the reconciler fixes
     * the rest.
     */
    async provision(project: Project, session: SessionToProvision, options: ProvisionOptions): Promise<void> {
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
    },

    /** Tears down the session's current sandbox, if it has a live one, its unsaved work saved first. */
    async stopSandboxOf(sessionId: string): Promise<void> {
      deps.onSandboxClosed(sessionId);
      const sandbox = await records.currentSandbox(sessionId);
      if (sandbox && (sandbox.status === "active" || sandbox.status === "provisioning")) {
        await checkpoint(sandbox);
        await teardown(sandbox.sandbox_id, sandbox.container_id, sandbox.token_id, "stopped");
      }
    },

    /**
     * Tears a sandbox down for the reconciler or the sweeper (its unsaved work saved first when it is only stopped:
     * idle, over its disk); a session still marked running becomes stopped.
     */
    async closeSandbox(sandbox: SandboxRecord, status: "stopped" | "error", reason: string): Promise<void> {
      deps.onSandboxClosed(sandbox.session_id);
      if (status === "stopped") await checkpoint(sandbox);
      await teardown(sandbox.sandbox_id, sandbox.container_id, sandbox.token_id, status);
      if (status === "error") await records.updateSandbox(sandbox.sandbox_id, { error: reason });
      // An error is a sandbox nobody stopped (it died, or its container vanished): its session failed.
      await records.transition(sandbox.session_id, ["running"], status === "error" ? "failed" : "stopped", {
        error: reason === "idle" ? undefined : reason,
      });
    },
  };
}

export type Provisioner = ReturnType<typeof createProvisioner>;
