import { SANDBOX_SERVICE_PORT, SandboxEnv } from "../../protocol/env.ts";
import type { Project } from "../../protocol/project.ts";
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

/** SPEC "Environment variables", exactly: secrets first so no secret can shadow a platform variable. */
export function sandboxEnv(input: SandboxEnvInput): Record<string, string> {
  const { session } = input;
  const model = session.agent_model ?? input.llm.model;
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
  if (input.proxy) {
    for (const name of PROXY_VARIABLES) env[name] = input.proxy;
    // The API itself (git, the CLI) and a model gateway on the host are reached directly, as without a proxy.
    env.NO_PROXY = env.no_proxy = [new URL(input.apiOrigin).hostname, "localhost", "127.0.0.1"].join(",");
  }
  if (session.initial_prompt) {
    env[SandboxEnv.initialPrompt] = session.initial_prompt;
    env[SandboxEnv.bootstrapAgentSession] = "1";
  }
  if (input.llm.baseUrl) {
    env[SandboxEnv.llmBaseUrl] = input.llm.baseUrl;
    env[SandboxEnv.gatewayUrl] = input.llm.baseUrl;
    if (input.llm.timeoutS !== undefined) env[SandboxEnv.modelTimeout] = String(input.llm.timeoutS);
    if (input.llm.apiKey) {
      env[SandboxEnv.llmApiKey] = input.llm.apiKey;
      env[SandboxEnv.gatewayApiKey] = input.llm.apiKey;
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
