import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { ClaimBody, DaemonHealth, EnvBody, PromptBody, SeedRuntime } from "../protocol/daemon.ts";
import type { TranscriptEntry } from "../protocol/transcript.ts";
import { VERSION } from "../protocol/version.ts";
import { createActivity } from "./activity.ts";
import { createAgentClient } from "./agent-client.ts";
import { saveCheckpoint } from "./checkpoint.ts";
import { loadDaemonConfig } from "./config.ts";
import { restoreConversation, storedTranscript } from "./conversation-restore.ts";
import { daemonError } from "./errors.ts";
import { startLink } from "./link.ts";
import { modelFailure } from "./model-failure.ts";
import { opencodeSpec } from "./opencode.ts";
import { createRuntimeSupervisor, type RuntimeSpec } from "./runtime.ts";
import { createSandboxLogReader } from "./sandbox-log.ts";
import { createDaemonServer } from "./server.ts";
import { type SessionEnv, withSessionEnv, writeSessionEnv } from "./session-env-plugin.ts";
import { readTranscript } from "./transcript.ts";
import { startWarmUpModel, WARM_UP_MODEL, WARM_UP_PROVIDER } from "./warm-up-model.ts";
import { headCommit, pullWorkspace, seedWorkspace } from "./workspace.ts";
import { cloneSessionWorkspace, type RepoState } from "./workspace-arrival.ts";

const RESTORE_ATTEMPTS = 3;
const STANDBY_NO_MODEL = "the agent runtime starts at its first use: no model is configured";
/** A prompt waits this long for its runtime's boot: under the API's 15 s for a control call, past it 503 (starting). */
const PROMPT_BOOT_WAIT_MS = 10_000;

const log = (msg: string) => process.stderr.write(`svc-agent: ${msg}\n`);

/**
 * The workspace's git credential helper as a shell command: the small program beside this one (git-credential-main.ts,
 * bundled as svc-git-credential.mjs), run by this Node with this program's flags.
 */
function credentialHelperCommand(): string {
  const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const self = process.argv[1]!;
  const helper = join(dirname(self), self.endsWith(".ts") ? "git-credential-main.ts" : "svc-git-credential.mjs");
  return [process.execPath, ...process.execArgv, helper].map(quote).join(" ");
}

async function daemon(): Promise<void> {
  let config = loadDaemonConfig();
  const activity = createActivity();
  // Secrets set (a value) or unset (null) while the session runs (POST /svc/env).
  const extraEnv: SessionEnv = {};
  // A pooled sandbox's session environment, from its claim: every later runtime start gets it as process env.
  let sessionEnv: Record<string, string> = {};
  let pool: DaemonHealth["pool"] = config.pooled ? "seeding" : undefined;
  const repo: RepoState = { state: config.autoClone || config.pooled ? "cloning" : "disabled", error: null };
  const startedAt = Date.now();
  const client = createAgentClient(config.agentPort, config.workspace);
  let currentSession: string | undefined;
  /** The restore of a restarted session's conversation (resumeOrBootstrap): a prompt waits until it is done. */
  let restored: Promise<void> = Promise.resolve();
  let busy = { at: 0, sessions: [] as string[] };

  // Only while a pooled sandbox warms up: a runtime started later (a restart after the claim) never names it.
  let warmUpModel: Awaited<ReturnType<typeof startWarmUpModel>> | undefined;
  const spec = (): RuntimeSpec =>
    config.agentCommand
      ? {
          command: config.agentCommand,
          cwd: config.workspace,
          port: config.agentPort,
          env: withSessionEnv(process.env as Record<string, string>, { ...sessionEnv, ...extraEnv }),
        }
      : opencodeSpec(config, { ...sessionEnv, ...extraEnv }, warmUpModel?.baseUrl);
  const runtime = createRuntimeSupervisor(spec, log);

  /**
   * Runs in progress. A run retrying a gateway it cannot reach, or one that sent nothing for SVC_MODEL_TIMEOUT_S, is
   * aborted here too: with nobody following it (the initial prompt), opencode would retry for minutes and the
   * sandbox would never count as idle.
   */
  async function busySessions(): Promise<string[]> {
    if (runtime.status().state !== "running") return [];
    if (Date.now() - busy.at > 1000) {
      const runs = await client.busySessions().catch(() => []);
      const stuck = runs.filter(
        (r) =>
          modelFailure({ type: "session.status", properties: { sessionID: r.id, status: r.status } }, undefined)?.abort,
      );
      await Promise.all(stuck.map((r) => client.abort(r.id).catch(() => {})));
      if (stuck.length > 0) {
        const why = stuck.map((r) => r.status.message).join("; ");
        log(`aborted ${stuck.length} run(s) retrying a model gateway that failed (${why})`);
      }
      busy = { at: Date.now(), sessions: runs.filter((r) => !stuck.includes(r)).map((r) => r.id) };
    }
    return busy.sessions;
  }

  const requireRuntime = () => {
    if (runtime.status().state !== "running")
      throw daemonError("AGENT_RUNTIME_UNAVAILABLE", "the agent runtime is not running");
  };
  /** opencode is given only the svc gateway as a provider: without one, no prompt could ever be answered. */
  const modelMissing = !config.agentCommand && !config.llm.baseUrl && config.runtimeProviders.length === 0;
  const requireModel = () => {
    if (modelMissing) {
      throw daemonError(
        "MODEL_NOT_CONFIGURED",
        "no model is configured (SVC_LLM_BASE_URL, or a project's OPENAI_API_KEY / ANTHROPIC_API_KEY)",
      );
    }
  };

  /** The runtime's agents, read once per runtime process: it reads its config directory when it boots. */
  let agentList: { pid: number | null; names: Promise<string[]> } | undefined;

  /**
   * A prompt goes to an agent the runtime defines, or is refused naming those it does: opencode would otherwise
   * run an unknown name as its default agent, and a typo would go unnoticed. A list that cannot be read refuses
   * nothing.
   */
  async function requireAgent(agent: string): Promise<void> {
    const pid = runtime.status().pid;
    if (agentList?.pid !== pid) agentList = { pid, names: client.agents() };
    const names = await agentList.names.catch(() => {
      agentList = undefined;
      return undefined;
    });
    if (names && !names.includes(agent))
      throw daemonError(
        "AGENT_NOT_FOUND",
        `agent '${agent}' is not defined in this session; its agents: ${names.join(", ")}`,
      );
  }

  /**
   * A restarted session's conversation back in the runtime, else its first prompt sent. Reading the transcript or
   * seeding the runtime can fail on a loaded machine: it is tried again before the agent goes on without it, since
   * an agent that forgot its conversation silently answers the next prompt out of context.
   */
  async function resumeOrBootstrap(readAtBoot: TranscriptEntry[] | undefined): Promise<void> {
    let answeredBefore = false;
    for (let attempt = 1; attempt <= RESTORE_ATTEMPTS && runtime.status().state === "running"; attempt++) {
      try {
        const earlier = (attempt === 1 && readAtBoot) || (await storedTranscript(config));
        answeredBefore = earlier.some((e) => e.role !== "user");
        const resumed = await restoreConversation(client, earlier);
        if (!resumed) break;
        currentSession = resumed;
        log(`restored the session's conversation (${earlier.length} entries)`);
        return;
      } catch (err) {
        log(`could not restore the session's conversation (attempt ${attempt}): ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 1000 * attempt));
      }
    }
    // The first prompt was answered in an earlier sandbox: running it again would redo that work.
    if (!answeredBefore) await sendBootstrapPrompt();
  }

  async function sendBootstrapPrompt(): Promise<void> {
    if (config.bootstrapPrompt && modelMissing) log("initial prompt not sent: no model gateway is configured");
    else if (config.bootstrapPrompt && runtime.status().state === "running") {
      try {
        if (config.agentName) await requireAgent(config.agentName);
        currentSession = await client.createSession("svc session");
        await client.prompt(currentSession, config.bootstrapPrompt, config.agentName);
      } catch (err) {
        log(`initial prompt failed: ${(err as Error).message}`);
      }
    }
  }

  /** A pooled sandbox seeded to boot its runtime only when claimed (SeedRuntime `on-claim`). */
  let runtimeOnClaim = false;

  /**
   * A pooled sandbox's workspace arrives as a git bundle; then the runtime boots and warms up, ready to claim, or
   * (`on-claim`) it is ready to claim at once and the runtime boots at the claim.
   */
  async function seed(bundle: NodeJS.ReadableStream, when: SeedRuntime): Promise<{ commit: string | null }> {
    if (pool !== "seeding")
      throw daemonError("CONFLICT", `this sandbox is ${pool ?? "not pooled"}, not waiting for a seed`);
    const file = join(tmpdir(), `svc-seed-${process.pid}.bundle`);
    try {
      await pipeline(bundle, createWriteStream(file, { mode: 0o600 }));
      await seedWorkspace(config, file, credentialHelperCommand());
    } catch (err) {
      pool = "failed";
      repo.state = "failed";
      repo.error = (err as Error).message.split("\n").slice(-2).join(" ");
      throw daemonError("CONFLICT", `could not seed the workspace: ${repo.error}`);
    } finally {
      await rm(file, { force: true });
    }
    repo.state = "cloned";
    runtimeOnClaim = when === "on-claim";
    pool = runtimeOnClaim ? "ready" : "warming";
    if (!runtimeOnClaim) void warmUp();
    return { commit: await headCommit(config.workspace) };
  }

  /**
   * A seeded pooled sandbox's runtime boots and runs one agent loop against the loopback warm-up model. Without a
   * model no prompt could use that boot: the runtime stands by (it starts at its first use) and the member is ready.
   */
  async function warmUp(): Promise<void> {
    if (modelMissing) {
      runtime.standBy();
      log(STANDBY_NO_MODEL);
      if (pool === "warming") pool = "ready";
      return;
    }
    if (!config.agentCommand) warmUpModel = await startWarmUpModel();
    runtime.start();
    await runtime.whenReady();
    if (warmUpModel) {
      await client
        .warmUp({ providerID: WARM_UP_PROVIDER, modelID: WARM_UP_MODEL })
        .catch((err) => log(`warm-up failed: ${(err as Error).message}`));
      warmUpModel.close();
      warmUpModel = undefined;
    }
    if (pool === "warming") pool = runtime.status().state === "running" ? "ready" : "failed";
  }

  async function claim(body: ClaimBody): Promise<{ claimed: true }> {
    if (pool !== "ready") throw daemonError("CONFLICT", `this sandbox is ${pool ?? "not pooled"}, not ready to claim`);
    pool = "claimed";
    sessionEnv = body.env;
    writeSessionEnv(config.agentHome, sessionEnv);
    config = loadDaemonConfig({ ...process.env, ...sessionEnv });
    if (!runtimeOnClaim) void sendBootstrapPrompt();
    else if (config.agentRuntime && (!config.bootstrapPrompt || modelMissing)) {
      runtime.standBy();
      void sendBootstrapPrompt();
    } else if (config.agentRuntime) {
      // Booted now, with the session's environment, as a cold sandbox's runtime is; prompts wait for its first.
      runtime.start();
      restored = runtime.whenReady().then(sendBootstrapPrompt);
    }
    return { claimed: true };
  }

  const server = createDaemonServer({
    serviceKey: config.serviceKey,
    workspace: config.workspace,
    sessionId: config.sessionId,
    servicePort: config.port,
    agentPort: config.agentPort,
    gatewayUrl: config.llm.baseUrl,
    modelTimeoutS: config.llm.timeoutS,
    modelMissing,
    activity,
    log,
    // The engine cannot exec into a Swarm task on another node: the API runs commands through this daemon instead.
    exec: { agentHome: config.agentHome, env: process.env },
    sandboxLog: createSandboxLogReader(config.logDir),
    control: {
      runtimeReady: () => runtime.status().state === "running",
      wake: runtime.wake,
      transcript: async (conversation) => ({ entries: await readTranscript(client, conversation) }),
      async checkpoint() {
        if (repo.state !== "cloned") return { sha: null };
        const saved = await saveCheckpoint(config);
        log(
          saved.sha ? `saved the workspace's unsaved work as checkpoint ${saved.sha}` : "nothing unsaved to checkpoint",
        );
        return saved;
      },
      async health(): Promise<DaemonHealth> {
        const sessions = await busySessions();
        return {
          status: "ok",
          version: VERSION,
          uptime_s: Math.round((Date.now() - startedAt) / 1000),
          ...(pool ? { pool } : {}),
          agent: runtime.status(),
          repo: {
            state: repo.state,
            url: config.repoUrl || null,
            branch: config.branch || null,
            commit: repo.state === "cloned" ? await headCommit(config.workspace) : null,
            error: repo.error,
          },
          last_activity_at: sessions.length > 0 ? new Date().toISOString() : activity.lastAt(),
          busy: sessions.length > 0,
        };
      },
      async refresh() {
        try {
          await pullWorkspace(config);
        } catch (err) {
          throw daemonError("CONFLICT", `could not fast-forward the workspace: ${(err as Error).message}`);
        }
        const restarted = await runtime.restart();
        return { commit: await headCommit(config.workspace), restarted };
      },
      async prompt(body: PromptBody) {
        requireModel();
        await runtime.wake(PROMPT_BOOT_WAIT_MS);
        requireRuntime();
        await restored;
        // The session's own agent unless the prompt names another: opencode's default is not the session's.
        const agent = body.agent ?? config.agentName;
        if (agent) await requireAgent(agent);
        const session =
          body.session ?? (body.new ? undefined : currentSession) ?? (await client.createSession("svc session"));
        await client.prompt(session, body.text, agent);
        currentSession = session;
        busy.at = 0;
        return { session };
      },
      async abort(body) {
        // On standby nothing has run: nothing to abort, and no reason to boot it.
        if (runtime.status().state === "standby") return { aborted: [] };
        requireRuntime();
        const sessions = body.session ? [body.session] : await busySessions();
        await Promise.all(sessions.map((s) => client.abort(s)));
        busy.at = 0;
        return { aborted: sessions };
      },
      seed,
      claim,
      async env(body: EnvBody) {
        for (const name of body.unset) extraEnv[name] = null;
        Object.assign(extraEnv, body.set);
        writeSessionEnv(config.agentHome, { ...sessionEnv, ...extraEnv });
        // opencode's shells read that file before each command (session-env-plugin.ts), so its conversation goes
        // on; another runtime has only its process environment, which a restart replaces.
        if (config.agentCommand) await runtime.restart();
        return {
          names: Object.keys(extraEnv)
            .filter((name) => extraEnv[name] !== null)
            .sort(),
        };
      },
    },
  });
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  log(`listening on ${config.host}:${config.port}`);
  // Dial-out: the API reaches this server through the link the daemon opens, needing no route into the sandbox.
  const link =
    config.linkUrl &&
    startLink({
      url: config.linkUrl,
      socket: config.linkSocket,
      serviceKey: config.serviceKey,
      target: { host: ["0.0.0.0", "::"].includes(config.host) ? "127.0.0.1" : config.host, port: config.port },
      accept: (socket) => server.emit("connection", socket),
      log,
    });

  const shutdown = async () => {
    if (link) link.stop();
    await runtime.stop();
    server.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown());
  process.on("SIGINT", () => void shutdown());

  if (config.autoClone && !config.pooled) await cloneSessionWorkspace(config, repo, credentialHelperCommand(), log);
  if (config.pooled || !config.agentRuntime) return;
  // The session's stored conversation, read once here and handed to its restore; unread (undefined), it counts as
  // there, so the runtime boots and its restore tries again.
  const stored = config.bootstrapPrompt ? undefined : await storedTranscript(config).catch(() => undefined);
  if (stored?.length === 0 || (modelMissing && !stored)) {
    // Without a model a first prompt could not be answered: booting for it would spend seconds of a core for nothing.
    void sendBootstrapPrompt();
    runtime.standBy();
    log(modelMissing ? STANDBY_NO_MODEL : "the agent runtime starts at its first use: this session has no prompt yet");
    return;
  }
  runtime.start();
  await runtime.whenReady();
  restored = resumeOrBootstrap(stored);
  await restored;
}

await daemon();
