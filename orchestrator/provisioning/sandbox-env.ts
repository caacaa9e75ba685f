import { SANDBOX_SERVICE_PORT, SandboxEnv } from "../../protocol/env.ts";
import type { Project } from "../../protocol/project.ts";
import { SANDBOX_LINK_ENV } from "../../protocol/sandbox-link.ts";
import type { SessionToProvision } from "../ports.ts";

export type SandboxEnvInput = {
  project: Project;
  session: SessionToProvision;
  repoUrl: string;
  /** The API's origin as a sandbox reaches it (never loopback: that is the container itself). */
  apiOrigin: string;
  serviceKey: string;
  cliToken: string;
  secrets: Record<string, string>;
  secretsRevision: number;
  /** `timeoutS`: seconds the gateway may send nothing before a turn fails (SVC_MODEL_TIMEOUT_S). */
  llm: { baseUrl?: string; apiKey?: string; model?: string; timeoutS?: number };
  /** The egress proxy's URL, for a sandbox whose only way out it is (egressProxyUrl). */
  proxy?: string;
  /** SVC_LINK_URL: where the daemon dials the API, which then reaches it through that link (SVC_SANDBOX_LINK). */
  linkUrl?: string;
};

/** Where curl, git, npm, pip and the agent's runtime look for a proxy. */
const PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/** The API's origin as the sandbox's proxy, its service key the password the proxy knows it by. */
export function egressProxyUrl(apiOrigin: string, serviceKey: string): string {
  const url = new URL(apiOrigin);
  url.username = "sandbox";
  url.password = serviceKey;
  return url.toString().replace(/\/$/, "");
}

/**
 * The model gateway a session's sandbox uses: the project's own when its secrets name one (SVC_LLM_BASE_URL, with
 * SVC_LLM_API_KEY and SVC_AGENT_MODEL), else the stack's. Never a mix: the stack's key must not go to the
 * project's gateway.
 */
export function modelOf(secrets: Record<string, string>, stack: SandboxEnvInput["llm"]): SandboxEnvInput["llm"] {
  const baseUrl = secrets[SandboxEnv.llmBaseUrl];
  if (!baseUrl) return stack;
  return {
    baseUrl,
    apiKey: secrets[SandboxEnv.llmApiKey],
    model: secrets[SandboxEnv.agentModel],
    timeoutS: stack.timeoutS,
  };
}

/** SPEC "Environment variables", exactly: secrets first so no secret can shadow a platform variable. */
export function sandboxEnv(input: SandboxEnvInput): Record<string, string> {
  const { session } = input;
  const llm = modelOf(input.secrets, input.llm);
  const model = session.agent_model ?? input.secrets[SandboxEnv.agentModel] ?? llm.model;
  const env: Record<string, string> = {
    ...input.secrets,
    [SandboxEnv.projectId]: input.project.id,
    [SandboxEnv.sessionId]: session.session_id,
    [SandboxEnv.branchName]: session.branch,
    [SandboxEnv.repoUrl]: input.repoUrl,
    [SandboxEnv.defaultBranch]: input.project.default_branch,
    [SandboxEnv.baseRef]: session.base_ref,
    [SandboxEnv.servicePort]: String(SANDBOX_SERVICE_PORT),
    [SandboxEnv.apiUrl]: `${input.apiOrigin}/v1`,
    [SandboxEnv.agentName]: session.agent_name,
    [SandboxEnv.autoClone]: "1",
    [SandboxEnv.secretNames]: Object.keys(input.secrets).sort().join(","),
    [SandboxEnv.secretsRevision]: String(input.secretsRevision),
    [SandboxEnv.serviceKey]: input.serviceKey,
    [SandboxEnv.cliToken]: input.cliToken,
    [SandboxEnv.executorToken]: input.cliToken,
  };
  if (model) env[SandboxEnv.agentModel] = model;
  if (input.linkUrl) {
    env[SANDBOX_LINK_ENV] = input.linkUrl;
    // Everything the API asks travels over the link: port 8000 stays for the sandbox's own use.
    env[SandboxEnv.listenHost] = "127.0.0.1";
  }
  if (input.proxy) {
    for (const name of PROXY_VARIABLES) env[name] = input.proxy;
    // The API itself (git, the CLI) and a model gateway on the host are reached directly, as without a proxy.
    env.NO_PROXY = env.no_proxy = [new URL(input.apiOrigin).hostname, "localhost", "127.0.0.1"].join(",");
  }
  if (session.initial_prompt) {
    env[SandboxEnv.initialPrompt] = session.initial_prompt;
    env[SandboxEnv.bootstrapAgentSession] = "1";
  }
  if (llm.baseUrl) {
    env[SandboxEnv.llmBaseUrl] = llm.baseUrl;
    env[SandboxEnv.gatewayUrl] = llm.baseUrl;
    if (llm.timeoutS !== undefined) env[SandboxEnv.modelTimeout] = String(llm.timeoutS);
    if (llm.apiKey) {
      env[SandboxEnv.llmApiKey] = llm.apiKey;
      env[SandboxEnv.gatewayApiKey] = llm.apiKey;
    }
  }
  return env;
}

/** The values of a sandbox's environment that are credentials or project secrets: what its output must not show. */
export function sensitiveValues(env: Record<string, string>): string[] {
  const names = [
    ...(env[SandboxEnv.secretNames] ?? "").split(",").filter(Boolean),
    SandboxEnv.serviceKey,
    SandboxEnv.cliToken,
    SandboxEnv.executorToken,
    SandboxEnv.llmApiKey,
    SandboxEnv.gatewayApiKey,
  ];
  return names.map((name) => env[name]).filter((v): v is string => Boolean(v));
}
