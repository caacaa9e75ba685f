import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { DaemonConfig } from "./config.ts";
import type { RuntimeSpec } from "./runtime.ts";
import { type SessionEnv, withSessionEnv, writeSessionEnvPlugin } from "./session-env-plugin.ts";
import { WARM_UP_MODEL, WARM_UP_PROVIDER } from "./warm-up-model.ts";
import { agentConfigDir } from "./workspace.ts";

const OPENCODE_VERSION = "1.18.33";
const PROVIDER_ID = "svc";

/**
 * opencode installs its plugin package into every config dir it reads, from the network. A seeded empty
 * node_modules and lock file stop that (sandboxes have no registry); git must not see them as changes.
 */
function seedConfigDir(dir: string, workspace: string): void {
  mkdirSync(join(dir, "node_modules"), { recursive: true });
  const lock = join(dir, "package-lock.json");
  if (!existsSync(lock)) {
    writeFileSync(
      lock,
      JSON.stringify({ packages: { "": { dependencies: { "@opencode-ai/plugin": OPENCODE_VERSION } } } }),
    );
  }
  const exclude = join(workspace, ".git", "info", "exclude");
  if (existsSync(join(workspace, ".git"))) {
    const rel = dir.startsWith(`${workspace}/`) ? dir.slice(workspace.length + 1) : undefined;
    const current = existsSync(exclude) ? readFileSync(exclude, "utf8") : "";
    if (rel && !current.includes(`/${rel}/node_modules/`)) {
      mkdirSync(join(workspace, ".git", "info"), { recursive: true });
      appendFileSync(
        exclude,
        `\n/${rel}/node_modules/\n/${rel}/package-lock.json\n/${rel}/package.json\n/${rel}/.gitignore\n`,
      );
    }
  }
}

/**
 * opencode's config: the model gateway as an OpenAI-compatible provider, nothing that phones home. Only that
 * provider is enabled, and those of opencode's own whose key the project set (OPENAI_API_KEY, ANTHROPIC_API_KEY):
 * with neither, opencode has none at all (a prompt fails at once with "No providers are available") rather than
 * falling back to every built-in one, which retry an unreachable internet for a minute.
 */
export function opencodeConfig(config: DaemonConfig, warmUpUrl?: string): Record<string, unknown> {
  const base: Record<string, unknown> = {
    autoupdate: false,
    share: "disabled",
    snapshot: false,
    lsp: false,
    formatter: false,
    enabled_providers: [PROVIDER_ID],
  };
  const gateway = config.llm.baseUrl;
  const own = config.runtimeProviders;
  if (!gateway && own.length === 0) return base;
  const warmUp = warmUpUrl
    ? {
        [WARM_UP_PROVIDER]: {
          npm: "@ai-sdk/openai-compatible",
          name: "svc warm-up (loopback, used once at boot)",
          options: { baseURL: warmUpUrl, apiKey: "none" },
          models: { [WARM_UP_MODEL]: { name: WARM_UP_MODEL, tool_call: true, limit: { context: 8000, output: 1000 } } },
        },
      }
    : {};
  const [prefix = "", ...rest] = config.agentModel?.split("/") ?? [];
  const gatewayModel = rest.length > 0 ? rest.join("/") : (config.agentModel ?? "default");
  // A model named by one of the runtime's own providers (`anthropic/claude-…`) runs there; any other on the
  // gateway; with neither named nor a gateway, the provider's own default.
  const model =
    rest.length > 0 && own.includes(prefix)
      ? config.agentModel
      : gateway
        ? `${PROVIDER_ID}/${gatewayModel}`
        : undefined;
  return {
    ...base,
    enabled_providers: [...(gateway ? [PROVIDER_ID] : []), ...own, ...Object.keys(warmUp)],
    ...(model ? { model, small_model: model } : {}),
    provider: {
      ...(gateway
        ? {
            [PROVIDER_ID]: {
              npm: "@ai-sdk/openai-compatible",
              name: "svc model gateway",
              options: {
                baseURL: gateway,
                apiKey: config.llm.apiKey ?? "none",
                // opencode aborts a call whose headers, or whose next event-stream read, take longer; it then
                // retries (up to 5 times, with backoff), which the daemon stops at the first retry (model-failure.ts).
                headerTimeout: config.llm.timeoutS * 1000,
                chunkTimeout: config.llm.timeoutS * 1000,
              },
              models: {
                [gatewayModel]: { name: gatewayModel, tool_call: true, limit: { context: 128_000, output: 16_000 } },
              },
            },
          }
        : {}),
      ...warmUp,
    },
  };
}

/** Never wait on a question: a sandbox run has nobody to answer it. */
const PERMISSIONS = { edit: "allow", bash: "allow", webfetch: "allow", doom_loop: "allow", external_directory: "deny" };

/** `warmUpUrl`: a pooled sandbox's loopback warm-up model (warm-up-model.ts), configured beside the gateway. */
export function opencodeSpec(config: DaemonConfig, sessionEnv: SessionEnv, warmUpUrl?: string): RuntimeSpec {
  const configDir = agentConfigDir(config.workspace);
  mkdirSync(config.agentHome, { recursive: true });
  seedConfigDir(configDir, config.workspace);
  seedConfigDir(join(config.agentHome, ".config", "opencode"), config.workspace);
  const content = opencodeConfig(config, warmUpUrl);
  content.plugin = [pathToFileURL(writeSessionEnvPlugin(config.agentHome)).href];
  return {
    command: [config.opencodeBin, "serve", "--hostname", "127.0.0.1", "--port", String(config.agentPort)],
    cwd: config.workspace,
    port: config.agentPort,
    env: {
      ...withSessionEnv(process.env as Record<string, string>, sessionEnv),
      HOME: config.agentHome,
      OPENCODE_CONFIG_DIR: configDir,
      OPENCODE_CONFIG_CONTENT: JSON.stringify(content),
      OPENCODE_PERMISSION: JSON.stringify(PERMISSIONS),
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_AUTOUPDATE: "1",
    },
  };
}
