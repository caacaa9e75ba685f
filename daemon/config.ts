import { z } from "zod";
import {
  AGENT_HOME,
  AGENT_RUNTIME_PORT,
  MODEL_TIMEOUT_S_DEFAULT,
  RUNTIME_PROVIDER_KEYS,
  SANDBOX_SERVICE_PORT,
  SANDBOX_WORKSPACE,
} from "../protocol/env.ts";
import { SANDBOX_LINK_ENV, SANDBOX_LINK_SOCKET_ENV } from "../protocol/sandbox-link.ts";
import { SANDBOX_LOG_DIR } from "../protocol/sandbox-log.ts";

const flag = z.enum(["0", "1"]).default("0");

const Env = z.object({
  SVC_TOKEN: z.string().min(16, "the sandbox service key is required"),
  SVC_SERVICE_PORT: z.coerce.number().int().min(1).max(65535).default(SANDBOX_SERVICE_PORT),
  SVC_LISTEN_HOST: z.string().default("0.0.0.0"),
  SVC_PROJECT_ID: z.string().default(""),
  SVC_SESSION_ID: z.string().default(""),
  SVC_BRANCH_NAME: z.string().default(""),
  SVC_BASE_REF: z.string().default(""),
  SVC_REPO_URL: z.string().default(""),
  SVC_API_URL: z.string().default(""),
  /** The API's link endpoint (ws:// or wss://): set, the daemon dials the API and is reached through it (link.ts). */
  [SANDBOX_LINK_ENV]: z
    .string()
    .regex(/^wss?:\/\/[^\s/]+/i, "must be a ws:// or wss:// URL")
    .optional(),
  /** The API's socket the link's URL is dialed through, when the API shares the engine's host (link-spares.ts linkSocket). */
  [SANDBOX_LINK_SOCKET_ENV]: z.string().startsWith("/", "must be an absolute path").optional(),
  /** The session's own token (the sandbox's svc CLI uses it): the daemon reads its session's transcript with it. */
  SVC_CLI_TOKEN: z.string().optional(),
  SVC_PROJECT_AUTO_CLONE: flag,
  SVC_BOOTSTRAP_AGENT_SESSION: flag,
  SVC_POOLED: flag,
  SVC_AGENT_RUNTIME: z.enum(["0", "1"]).default("1"),
  SVC_INITIAL_PROMPT: z.string().optional(),
  SVC_AGENT_NAME: z.string().default("build"),
  SVC_AGENT_MODEL: z.string().optional(),
  SVC_LLM_BASE_URL: z.string().optional(),
  SVC_LLM_API_KEY: z.string().optional(),
  SVC_GW_URL: z.string().optional(),
  SVC_GW_API_KEY: z.string().optional(),
  /**
   * The stack setting's minimum is 5 (protocol/stack-settings.ts); the daemon takes down to 1 so tests outside a
   * stack can stall a gateway for a short time.
   */
  SVC_MODEL_TIMEOUT_S: z.coerce.number().int().min(1).max(3600).default(MODEL_TIMEOUT_S_DEFAULT),
  /** Fixed by the image; overridable so the daemon can run outside a container in tests. */
  SVC_WORKSPACE: z.string().default(SANDBOX_WORKSPACE),
  SVC_AGENT_HOME: z.string().default(AGENT_HOME),
  SVC_AGENT_PORT: z.coerce.number().int().min(1).max(65535).default(AGENT_RUNTIME_PORT),
  /** Another agent runtime instead of opencode: a JSON array `["cmd", "arg", ...]` that serves on SVC_AGENT_PORT. */
  SVC_AGENT_COMMAND: z.string().optional(),
  SVC_OPENCODE_BIN: z.string().default("/opt/svc/bin/opencode"),
  /** Where the sandbox's log keeper writes (images/sandbox/svc-entrypoint); overridable as the workspace is. */
  SVC_LOG_DIR: z.string().default(SANDBOX_LOG_DIR),
});

export type DaemonConfig = ReturnType<typeof loadDaemonConfig>;

/** The daemon's only reader of process.env. */
export function loadDaemonConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`svc-agent: invalid environment: ${issue.path.join(".")}: ${issue.message}`);
  }
  const e = parsed.data;
  let agentCommand: string[] | undefined;
  if (e.SVC_AGENT_COMMAND) {
    const cmd = z.array(z.string().min(1)).min(1).safeParse(JSON.parse(e.SVC_AGENT_COMMAND));
    if (!cmd.success) throw new Error("svc-agent: SVC_AGENT_COMMAND must be a JSON array of strings");
    agentCommand = cmd.data;
  }
  return {
    serviceKey: e.SVC_TOKEN,
    port: e.SVC_SERVICE_PORT,
    host: e.SVC_LISTEN_HOST,
    projectId: e.SVC_PROJECT_ID,
    sessionId: e.SVC_SESSION_ID,
    branch: e.SVC_BRANCH_NAME,
    repoUrl: e.SVC_REPO_URL,
    apiUrl: e.SVC_API_URL.replace(/\/+$/, ""),
    linkUrl: e[SANDBOX_LINK_ENV],
    linkSocket: e[SANDBOX_LINK_SOCKET_ENV],
    cliToken: e.SVC_CLI_TOKEN,
    autoClone: e.SVC_PROJECT_AUTO_CLONE === "1",
    /** A warm-pool sandbox: its workspace comes from the orchestrator (POST /svc/pool/seed), a session claims it. */
    pooled: e.SVC_POOLED === "1",
    /** False for a sandbox that only runs commands (a CR's check): its agent runtime would cost a boot for nothing. */
    agentRuntime: e.SVC_AGENT_RUNTIME === "1",
    baseRef: e.SVC_BASE_REF,
    bootstrapPrompt: e.SVC_BOOTSTRAP_AGENT_SESSION === "1" ? e.SVC_INITIAL_PROMPT : undefined,
    agentName: e.SVC_AGENT_NAME,
    agentModel: e.SVC_AGENT_MODEL,
    llm: {
      baseUrl: e.SVC_LLM_BASE_URL ?? e.SVC_GW_URL,
      apiKey: e.SVC_LLM_API_KEY ?? e.SVC_GW_API_KEY,
      /** Seconds the gateway may send nothing (no headers, no byte of the stream) before the turn fails. */
      timeoutS: e.SVC_MODEL_TIMEOUT_S,
    },
    workspace: e.SVC_WORKSPACE,
    agentHome: e.SVC_AGENT_HOME,
    agentPort: e.SVC_AGENT_PORT,
    agentCommand,
    opencodeBin: e.SVC_OPENCODE_BIN,
    logDir: e.SVC_LOG_DIR,
    /** The runtime's own providers (opencode's ids) whose key the project set as a secret (OPENAI_API_KEY...). */
    runtimeProviders: Object.entries(RUNTIME_PROVIDER_KEYS).flatMap(([key, id]) => (env[key] ? [id] : [])),
  };
}
