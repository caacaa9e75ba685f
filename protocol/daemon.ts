import { z } from "zod";
import { SafeName, SafeText } from "./text.ts";
import { RuntimeEntry } from "./transcript.ts";

/**
 * State of the agent runtime that svc-agent supervises on 127.0.0.1:4096; `standby`: not started, it starts at its
 * first use (a session with no prompt yet).
 */
export const AgentRuntimeState = z.enum(["starting", "running", "restarting", "stopped", "disabled", "standby"]);
export type AgentRuntimeState = z.infer<typeof AgentRuntimeState>;

/** GET /svc/health (no authentication). */
export const DaemonHealth = z.object({
  status: z.literal("ok"),
  version: z.string(),
  uptime_s: z.number(),
  agent: z.object({
    state: AgentRuntimeState,
    pid: z.number().int().nullable(),
    restarts: z.number().int(),
    error: z.string().nullable(),
  }),
  repo: z.object({
    /** `disabled` when the sandbox was started without SVC_PROJECT_AUTO_CLONE. */
    state: z.enum(["cloning", "cloned", "failed", "disabled"]),
    url: z.string().nullable(),
    branch: z.string().nullable(),
    commit: z.string().nullable(),
    error: z.string().nullable(),
  }),
  /**
   * A warm-pool sandbox (SVC_POOLED=1): `seeding` until the orchestrator sends its workspace, `warming` while the
   * agent runtime boots, `ready` to be claimed (its runtime serving, or booted at the claim: SeedRuntime),
   * `claimed` once a session owns it. Absent in a session's own sandbox.
   */
  pool: z.enum(["seeding", "warming", "ready", "claimed", "failed"]).optional(),
  /** Last proxied request or control call; the idle sweeper hibernates sandboxes by it. */
  last_activity_at: z.string(),
  /** An agent run is in progress: never idle while true. */
  busy: z.boolean(),
});
export type DaemonHealth = z.infer<typeof DaemonHealth>;

/**
 * POST /svc/pool/seed?runtime=…: `now` (the default) boots the agent runtime and warms it up once the workspace is
 * cloned, so the sandbox is `ready` with it serving; `on-claim` makes it `ready` as soon as the workspace is cloned
 * and boots the runtime when a session claims it, as a cold sandbox's boots when it starts (a burst's extra pool
 * members: orchestrator/provisioning/warm-pool.ts).
 */
export const SeedRuntime = z.enum(["now", "on-claim"]);
export type SeedRuntime = z.infer<typeof SeedRuntime>;

/**
 * POST /svc/prompt: deliver a prompt to the agent, in the conversation `session` names, else in the current one
 * (a new one with `new`, or when there is none yet).
 */
export const PromptBody = z
  .object({
    text: SafeText.min(1).max(200_000),
    session: SafeName.min(1).max(200).optional(),
    agent: SafeName.min(1).max(100).optional(),
    new: z.boolean().optional(),
  })
  .strict();
export type PromptBody = z.infer<typeof PromptBody>;

export const PromptAccepted = z.object({ session: z.string() });
export type PromptAccepted = z.infer<typeof PromptAccepted>;

/** POST /svc/abort: abort the current run (of one agent session, or of every busy one). */
export const AbortBody = z.object({ session: SafeName.min(1).max(200).optional() }).strict();
export type AbortBody = z.infer<typeof AbortBody>;

export const AbortResult = z.object({ aborted: z.array(z.string()) });
export type AbortResult = z.infer<typeof AbortResult>;

const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "not a variable name");

/** POST /svc/env: change the agent runtime's environment; it restarts with the new values. */
export const EnvBody = z
  .object({
    set: z.record(EnvName, SafeText.max(65_536)).default({}),
    unset: z.array(EnvName).default([]),
  })
  .strict();
export type EnvBody = z.infer<typeof EnvBody>;

export const EnvResult = z.object({ names: z.array(z.string()) });
export type EnvResult = z.infer<typeof EnvResult>;

/**
 * POST /svc/claim: a warm-pool sandbox becomes its session's. `env` is what the session adds to the sandbox's
 * environment (its CLI token, its first prompt); the agent's shells see it from then on.
 */
export const ClaimBody = z.object({ env: z.record(EnvName, SafeText.max(200_000)) }).strict();
export type ClaimBody = z.infer<typeof ClaimBody>;

/**
 * POST /svc/egress-refused: the API's egress proxy refused a connection of this sandbox (`[sandbox] egress` of the
 * project's svc.toml); the daemon prints it in the sandbox's log and tells its events clients.
 */
export const EgressRefusedBody = z
  .object({
    host: SafeName.min(1).max(255),
    port: z.number().int().min(1).max(65_535),
    reason: SafeName.min(1).max(300),
  })
  .strict();
export type EgressRefusedBody = z.infer<typeof EgressRefusedBody>;

/**
 * POST /svc/checkpoint (the orchestrator, before the sandbox stops): the workspace's unsaved work pushed to
 * refs/svc/checkpoints/<session id>; `sha` null when there was none (the ref is then deleted).
 */
export const CheckpointResult = z.object({ sha: z.string().nullable() });
export type CheckpointResult = z.infer<typeof CheckpointResult>;

/** POST /svc/refresh: re-pull the session branch and restart the runtime in place. */
export const RefreshResult = z.object({ commit: z.string().nullable(), restarted: z.boolean() });
export type RefreshResult = z.infer<typeof RefreshResult>;

/**
 * GET /svc/events (service key): what the agent does, as server-sent events of these, whatever runtime runs on
 * the agent port. `ready` comes first, once the runtime's own stream is connected; `session` is the runtime's
 * conversation id (PromptAccepted.session).
 */
export const AgentEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("ready") }),
  /** A run started: a client waiting for its message's run ignores `idle` and `error` of earlier runs. */
  z.object({ type: z.literal("busy"), session: z.string() }),
  z.object({ type: z.literal("text"), session: z.string(), delta: z.string() }),
  z.object({
    type: z.literal("tool"),
    session: z.string(),
    tool: z.string(),
    status: z.enum(["running", "completed", "error"]),
    title: z.string().nullable(),
  }),
  z.object({ type: z.literal("idle"), session: z.string() }),
  z.object({ type: z.literal("error"), session: z.string().nullable(), message: z.string() }),
  /** The API's egress proxy refused a connection of this sandbox (EgressRefusedBody): not the runtime's. */
  z.object({ type: z.literal("egress_refused"), host: z.string(), port: z.number().int(), reason: z.string() }),
  /**
   * Only with `?entries=1` (the API's transcript recorder): a part of the conversation, whole, each time it
   * changes (a streaming text at most once a second, and when it ends; a tool at each status).
   */
  z.object({ type: z.literal("entry"), session: z.string(), entry: RuntimeEntry }),
]);
export type AgentEvent = z.infer<typeof AgentEvent>;
