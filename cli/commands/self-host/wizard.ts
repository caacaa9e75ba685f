/**
 * The credential wizard: only the integrations SPEC lists (app deployment, repository access, app connector)
 * and the model gateway, each skippable. `svc self-host configure` runs it; so does the first interactive start.
 */
import { readCliEnv } from "../../config.ts";
import { CliError, usageError } from "../../errors.ts";
import { info } from "../../output.ts";
import { Interrupted, interactive } from "../../prompt.ts";
import { checkGateway } from "./gateway-checks.ts";
import { runningMode } from "./running-mode.ts";
import { configuredModel, ensureState, type SelfHostPaths, type SelfHostState, selfHostPaths } from "./state.ts";
import { type Answers, askChoice, askPrivateKeyFile, askSetting, save } from "./wizard-questions.ts";

const REPO_TOKEN_KEYS = ["SVC_REPO_ACCESS_TOKEN"];
const GITHUB_APP_KEYS = [
  "SVC_GITHUB_APP_ID",
  "SVC_GITHUB_APP_INSTALLATION_ID",
  "SVC_GITHUB_APP_PRIVATE_KEY",
  "SVC_GITHUB_API_URL",
];
const SLACK_KEYS = ["SVC_SLACK_SIGNING_SECRET", "SVC_SLACK_BOT_TOKEN", "SVC_SLACK_API_URL"];

const removing = (keys: string[]) => Object.fromEntries(keys.map((k) => [k, undefined]));
const has = (answers: Answers, keys: string[]) => keys.some((k) => answers.state.env[k] !== undefined);

async function appDeployment(answers: Answers): Promise<void> {
  info("\nApp deployment: where the [[apps]] of svc.toml run (local: containers on this machine's Docker)");
  await askSetting(answers, "SVC_APP_PROVIDER", "provider (local/none)");
}

async function repositoryAccess(answers: Answers): Promise<void> {
  info("\nRepository access: how the stack reaches private git remotes (a token, or a GitHub App)");
  const current = has(answers, REPO_TOKEN_KEYS) ? "token" : has(answers, GITHUB_APP_KEYS) ? "app" : "none";
  const choice = await askChoice("access with", ["token", "app", "none"], current);
  if (choice === "none") {
    if (current !== "none") save(answers, removing([...REPO_TOKEN_KEYS, ...GITHUB_APP_KEYS]));
    return;
  }
  if (choice === "token") {
    await askSetting(answers, "SVC_REPO_ACCESS_TOKEN", "token");
    if (has(answers, REPO_TOKEN_KEYS)) save(answers, removing(GITHUB_APP_KEYS));
  } else {
    await askSetting(answers, "SVC_GITHUB_APP_ID", "GitHub App id");
    await askSetting(answers, "SVC_GITHUB_APP_INSTALLATION_ID", "installation id");
    await askPrivateKeyFile(answers, "SVC_GITHUB_APP_PRIVATE_KEY", "private key file (.pem)");
    await askSetting(answers, "SVC_GITHUB_API_URL", "GitHub API URL");
    if (GITHUB_APP_KEYS.slice(0, 3).every((k) => answers.state.env[k] !== undefined)) {
      save(answers, removing(REPO_TOKEN_KEYS));
    } else {
      info("    the app is used once its id, installation id and key are all given");
    }
  }
  await askSetting(answers, "SVC_REPO_ACCESS_URL", "sent only to remotes under");
}

async function appConnector(answers: Answers): Promise<void> {
  info("\nApp connector: a chat workspace whose messages start sessions");
  const current = has(answers, SLACK_KEYS) ? "slack" : "none";
  const choice = await askChoice("provider", ["slack", "none"], current);
  if (choice === "none") {
    if (current !== "none") save(answers, removing(SLACK_KEYS));
    return;
  }
  await askSetting(answers, "SVC_SLACK_SIGNING_SECRET", "signing secret");
  await askSetting(answers, "SVC_SLACK_BOT_TOKEN", "bot token (xoxb-…)");
  await askSetting(answers, "SVC_SLACK_API_URL", "Web API URL");
}

/** Asked until a real chat-completions call passes, or the person keeps what they gave. */
async function modelGateway(answers: Answers): Promise<void> {
  info("\nModel gateway: the OpenAI-compatible API the agents call");
  for (;;) {
    await askSetting(answers, "SVC_LLM_BASE_URL", "base URL (usually ending in /v1)");
    await askSetting(answers, "SVC_LLM_API_KEY", "API key");
    await askSetting(answers, "SVC_AGENT_MODEL", "model");
    const model = configuredModel(answers.state);
    if (!model) {
      if (answers.state.env.SVC_LLM_BASE_URL) info("    no model named: the agents have no model until one is");
      return;
    }
    info("    checking the gateway with one tiny request…");
    const check = await checkGateway(model);
    info(`    ${check.ok ? "✓" : "✗"} ${check.detail}`);
    if (check.ok) return;
    const next = await askChoice("re-enter the gateway's settings, or keep them", ["re-enter", "keep"], "re-enter");
    if (next === "keep") return;
  }
}

/** Every question in turn; the state file holds each answer as soon as it is given. */
async function runWizard(paths: SelfHostPaths, state: SelfHostState): Promise<void> {
  const answers: Answers = { paths, state };
  info(
    "svc self-host asks about integrations, each optional: Enter skips a question or keeps the value in brackets,\n" +
      "secrets are typed without echo, Ctrl-C stops (answers given so far are kept).",
  );
  try {
    await appDeployment(answers);
    await repositoryAccess(answers);
    await appConnector(answers);
    await modelGateway(answers);
  } catch (err) {
    if (err instanceof Interrupted) throw new CliError(`stopped; the answers given so far are saved in ${paths.state}`);
    throw err;
  }
  state.wizard_done = true;
  save(answers, {});
  info(`\n✓ saved in ${paths.state} (owner-only); 'svc self-host env ls' lists every setting`);
}

/** `svc self-host configure`. */
export async function configure(): Promise<void> {
  if (!interactive()) {
    throw usageError(
      "svc self-host configure asks its questions on a terminal; when not interactive, set values with " +
        "'svc self-host env set KEY=VALUE …' (their keys: 'svc self-host env ls')",
    );
  }
  const paths = selfHostPaths();
  await runWizard(paths, ensureState(paths));
  info(
    (await runningMode(paths))
      ? "the stack is running: 'svc self-host restart' applies the changes"
      : "applied at the next 'svc self-host start'",
  );
}

/**
 * The first start at a terminal asks before starting (the answers mutate `state`, which start then uses).
 * Never without a person to answer: not off a TTY, not in CI, not with --no-wizard or SVC_NO_WIZARD=1.
 */
export async function firstStartWizard(paths: SelfHostPaths, state: SelfHostState, options: { wizard?: boolean }) {
  if (state.wizard_done || options.wizard === false || !interactive()) return;
  if (readCliEnv().noWizard) return;
  await runWizard(paths, state);
}
