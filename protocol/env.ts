/** Environment variables injected into every session sandbox (SPEC "Environment variables"). */
export const SandboxEnv = {
  projectId: "SVC_PROJECT_ID",
  sessionId: "SVC_SESSION_ID",
  branchName: "SVC_BRANCH_NAME",
  repoUrl: "SVC_REPO_URL",
  defaultBranch: "SVC_DEFAULT_BRANCH",
  baseRef: "SVC_BASE_REF",
  servicePort: "SVC_SERVICE_PORT",
  /** The daemon's listening address: loopback when it dials out, so nothing outside the sandbox reaches port 8000. */
  listenHost: "SVC_LISTEN_HOST",
  apiUrl: "SVC_API_URL",
  agentName: "SVC_AGENT_NAME",
  agentModel: "SVC_AGENT_MODEL",
  initialPrompt: "SVC_INITIAL_PROMPT",
  autoClone: "SVC_PROJECT_AUTO_CLONE",
  secretNames: "SVC_PROJECT_SECRET_NAMES",
  secretsRevision: "SVC_PROJECT_SECRETS_REVISION",
  serviceKey: "SVC_TOKEN",
  cliToken: "SVC_CLI_TOKEN",
  executorToken: "SVC_EXECUTOR_TOKEN",
  bootstrapAgentSession: "SVC_BOOTSTRAP_AGENT_SESSION",
  llmApiKey: "SVC_LLM_API_KEY",
  llmBaseUrl: "SVC_LLM_BASE_URL",
  gatewayApiKey: "SVC_GW_API_KEY",
  gatewayUrl: "SVC_GW_URL",
  /** Not SPEC's: seconds the model gateway may send nothing before the turn fails (SVC_MODEL_TIMEOUT_S). */
  modelTimeout: "SVC_MODEL_TIMEOUT_S",
  /** Not SPEC's: marks a warm-pool sandbox, seeded and warmed before a session claims it. */
  pooled: "SVC_POOLED",
  /** Not SPEC's: "0" for a sandbox that runs commands only (a CR's check): no agent runtime is started. */
  agentRuntime: "SVC_AGENT_RUNTIME",
} as const;

/**
 * What a claim adds to a pooled sandbox's environment: the rest is the same for every session of the project. A
 * check's claim says it runs no agent (agentRuntime "0"), so a member seeded to boot its runtime at the claim does not.
 */
export const CLAIMED_ENV = [
  SandboxEnv.cliToken,
  SandboxEnv.executorToken,
  SandboxEnv.initialPrompt,
  SandboxEnv.bootstrapAgentSession,
  SandboxEnv.agentRuntime,
] as const;

/**
 * Variables the CLI reads (SPEC "Read by the CLI"), plus SVC_HOME for the self-host stack and SVC_BIN_DIR, where
 * the install script puts the `svc` shim.
 */
export const CliEnv = {
  cliToken: "SVC_CLI_TOKEN",
  executorToken: "SVC_EXECUTOR_TOKEN",
  apiUrl: "SVC_API_URL",
  projectId: "SVC_PROJECT_ID",
  configFile: "SVC_CONFIG_FILE",
  dashboardUrl: "SVC_DASHBOARD_URL",
  home: "SVC_HOME",
  binDir: "SVC_BIN_DIR",
  branchName: "SVC_BRANCH_NAME",
  headRef: "SVC_HEAD_REF",
  sessionId: "SVC_SESSION_ID",
} as const;

/** The platform reserves this prefix: secrets may not use it. */
export const RESERVED_ENV_PREFIX = "SVC_";

export const SANDBOX_SERVICE_PORT = 8000;
/** The name sandboxes know an API that runs in a container by: it joins each sandbox's network under it. */
export const SANDBOX_API_ALIAS = "svc-api";
export const AGENT_RUNTIME_PORT = 4096;
export const SANDBOX_WORKSPACE = "/workspace";
export const AGENT_HOME = "/opt/svc/home";
/** A claimed pooled sandbox's session environment (CLAIMED_ENV), as JSON: its shells and `svc sessions exec` read it. */
export const SESSION_ENV_FILE_NAME = ".svc-session-env.json";
export const SESSION_ENV_FILE = `${AGENT_HOME}/${SESSION_ENV_FILE_NAME}`;
export const DEFAULT_PREVIEW_PORT = 3000;
/** SVC_MODEL_TIMEOUT_S when unset, for the API and for a daemon started without it. */
export const MODEL_TIMEOUT_S_DEFAULT = 120;

/** How a self-hosted installation gets a model gateway: the exact command, quoted in every "no model" message. */
export const MODEL_SETUP_COMMAND = `svc self-host env set ${SandboxEnv.llmBaseUrl}=… ${SandboxEnv.llmApiKey}=… ${SandboxEnv.agentModel}=…`;

/** Project secrets that give one project a model gateway of its own, in place of the stack's (DESIGN). */
export const PROJECT_MODEL_SECRETS: readonly string[] = [
  SandboxEnv.llmBaseUrl,
  SandboxEnv.llmApiKey,
  SandboxEnv.agentModel,
];

/** Project secrets that turn on the agent runtime's own providers, by opencode's provider id. */
export const RUNTIME_PROVIDER_KEYS: Readonly<Record<string, string>> = {
  OPENAI_API_KEY: "openai",
  ANTHROPIC_API_KEY: "anthropic",
};

/** The other way to a model, for one project, named beside MODEL_SETUP_COMMAND in every "no model" message. */
export const PROJECT_MODEL_COMMAND = `svc secrets set ${SandboxEnv.llmBaseUrl}=… ${SandboxEnv.llmApiKey}=… ${SandboxEnv.agentModel}=… (or OPENAI_API_KEY=… / ANTHROPIC_API_KEY=…)`;
