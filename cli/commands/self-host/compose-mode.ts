import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { hashSecret } from "../../../protocol/credential.ts";
import { stackSetting } from "../../../protocol/stack-settings.ts";
import { CliError } from "../../errors.ts";
import { type ComposeRun, compose, composeFiles, composeProject, serviceContainers } from "./compose.ts";
import { ensureComposeImages, IMAGE_VARIABLES, type Progress } from "./compose-images.ts";
import { containerLogLines } from "./container-logs.ts";
import { sleep } from "./health.ts";
import { installHostFirewall, removeHostFirewall } from "./host-firewall.ts";
import { callerEnv } from "./process.ts";
import { localOrigin, type SelfHostPaths, type SelfHostState, writeState } from "./state.ts";

const START_TIMEOUT_MS = 180_000;

/** Besides the settings `start` manages, the compose file's own: its database, and the images it runs. */
const SET_BY_COMPOSE = new Set(["DATABASE_URL", ...IMAGE_VARIABLES]);

/**
 * The API's settings from `env set` as a compose (or stack) file's environment: `$` doubled against interpolation,
 * without what the file itself sets (`skip` adds keys of its own).
 */
export function apiSettings(state: SelfHostState, skip: readonly string[] = []): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [key, value] of Object.entries(state.env)) {
    if (SET_BY_COMPOSE.has(key) || skip.includes(key) || stackSetting(key)?.managedBy) continue;
    environment[key] = value.replaceAll("$", "$$$$");
  }
  return environment;
}

/** The API's settings from `env set`, as a compose override file (JSON is YAML). */
function writeSettings(path: string, state: SelfHostState): void {
  const environment = apiSettings(state);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${JSON.stringify({ services: { api: { environment } } }, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** How compose is run for this stack: project, files, and the variables compose.yaml asks for. */
export function composeRun(paths: SelfHostPaths, state: SelfHostState): ComposeRun {
  const files = composeFiles(paths);
  const origin = localOrigin(state);
  return {
    project: composeProject(paths),
    files,
    env: {
      ...callerEnv(),
      SVC_POSTGRES_PASSWORD: state.postgres_password ?? "",
      SVC_SECRETS_KEY: state.secrets_key,
      SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(state.admin_token),
      SVC_PUBLIC_URL: state.env.SVC_PUBLIC_URL ?? origin,
      SVC_LISTEN: state.listen,
      SVC_PORT: String(state.port),
    },
  };
}

/** Waits until every container of the stack runs and passes its health check; a dead one fails the start. */
async function waitHealthy(run: ComposeRun, expected: number, progress: Progress): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const containers = await serviceContainers(run.project);
    const dead = containers.find((c) => c.state === "exited" || c.state === "dead" || c.health === "unhealthy");
    if (dead) {
      const lines: string[] = [];
      for await (const { line } of containerLogLines(dead.name, { tail: 20 })) lines.push(line);
      throw new CliError(
        `the ${dead.service} service failed to start (${dead.status}); its last lines:\n${lines.join("\n")}`,
      );
    }
    const waiting = containers.filter((c) => c.state !== "running" || c.health === "starting");
    if (containers.length >= expected && waiting.length === 0) return;
    progress(`waiting for ${waiting.map((c) => c.service).join(", ") || "the services"} to be healthy…`);
    await sleep(500);
  }
  throw new CliError(`the stack did not become healthy within ${START_TIMEOUT_MS / 1000}s; see 'svc self-host logs'`);
}

/** What `up` needs: the database password made once, the settings file written, the images built when missing. */
export async function prepareCompose(paths: SelfHostPaths, state: SelfHostState, progress: Progress) {
  if (!state.postgres_password) {
    state.postgres_password = randomBytes(24).toString("base64url");
    writeState(paths, state);
  }
  const run = composeRun(paths, state);
  writeSettings(run.files[1]!, state);
  const chosen = Object.fromEntries(IMAGE_VARIABLES.flatMap((k) => (state.env[k] ? [[k, state.env[k]]] : [])));
  const images = await ensureComposeImages(run, chosen, progress);
  return { run, up: { ...run, env: { ...run.env, ...images } } };
}

/** Builds what is missing, brings the services up (data volumes kept from any earlier start) and waits for health. */
export async function startCompose(paths: SelfHostPaths, state: SelfHostState, progress: Progress): Promise<void> {
  const { run, up } = await prepareCompose(paths, state, progress);
  // Before the API runs: no sandbox of this start sees the host's other ports, even for a moment.
  await installHostFirewall(run.project, state.env);
  progress(`starting postgres, ${state.api_replicas > 1 ? `${state.api_replicas} api replicas` : "api"} and edge…`);
  const result = await compose(up, ["up", "-d", "--remove-orphans", "--scale", `api=${state.api_replicas}`]);
  if (result.code !== 0)
    throw new CliError(`compose up failed:\n${result.output.trim().split("\n").slice(-20).join("\n")}`);
  await waitHealthy(up, state.api_replicas + 2, progress);
}

/** Stops the services; containers and volumes stay, so the next start keeps every project, CR and session. */
export async function stopCompose(paths: SelfHostPaths, state: SelfHostState): Promise<boolean> {
  const run = composeRun(paths, state);
  const running = (await serviceContainers(run.project)).some((c) => c.state === "running");
  if (!running) return false;
  const result = await compose(run, ["stop"]);
  if (result.code !== 0) throw new CliError(`compose stop failed:\n${result.output.trim()}`);
  // After the API: its sandboxes, which keep running, reach the host's ports again until the next start.
  await removeHostFirewall(run.project, state.env);
  return true;
}

/**
 * Removes the stack's containers and network, and with `volumes` its volumes (its database and repositories):
 * uninstall's, not stop's. Compose removes what its file declares, containers or not.
 */
export async function removeComposeStack(
  paths: SelfHostPaths,
  state: SelfHostState,
  options: { volumes: boolean } = { volumes: true },
): Promise<void> {
  const run = composeRun(paths, state);
  const result = await compose(run, ["down", ...(options.volumes ? ["--volumes"] : []), "--remove-orphans"]);
  if (result.code !== 0) throw new CliError(`compose down failed:\n${result.output.trim()}`);
}
