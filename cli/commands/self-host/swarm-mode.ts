import { randomBytes } from "node:crypto";
import { CliError } from "../../errors.ts";
import { warn } from "../../output.ts";
import { composeFiles } from "./compose.ts";
import { ensureComposeImages, IMAGE_VARIABLES, type Progress } from "./compose-images.ts";
import { composeRun } from "./compose-mode.ts";
import { probeHealth, sleep } from "./health.ts";
import { installationIds } from "./installation-objects.ts";
import { localOrigin, type SelfHostPaths, type SelfHostState, writeState } from "./state.ts";
import {
  dockerCli,
  removeInstallationServices,
  removeNetworks,
  STACK_LABEL,
  type StackService,
  serviceTasks,
  stackName,
  stackServices,
  type Task,
} from "./swarm.ts";
import { type ManagerDeps, requireSwarmManager } from "./swarm-manager.ts";
import { overrideInput, SET_BY_STACK, stackFiles, writeStackOverride } from "./swarm-stack-file.ts";

const START_TIMEOUT_MS = 180_000;
/** A service whose tasks failed this often since the deploy is failing, not starting (the API waits for PostgreSQL). */
const FAILED_TASKS = 3;

export type SwarmDeps = { manager?: ManagerDeps };

/** The variables compose/stack.yaml asks for: compose mode's (secrets, port, URL) and the stack's name. */
function stackEnv(paths: SelfHostPaths, state: SelfHostState): Record<string, string> {
  return { ...composeRun(paths, state).env, SVC_STACK: stackName(paths) };
}

/** A task that will not run: refused by every node (no image, no node fits), or failed again and again. */
function failingTask(tasks: Task[], since: string): Task | undefined {
  const recent = tasks.filter((t) => t.CreatedAt >= since);
  const rejected = recent.find((t) => t.Status.State === "rejected" || (t.Status.State === "pending" && t.Status.Err));
  if (rejected) return rejected;
  const failed = recent.filter((t) => t.Status.State === "failed");
  return failed.length >= FAILED_TASKS ? failed[0] : undefined;
}

/** What `start` shows of a failing service: the engine's word on its tasks, and its last log lines. */
async function failure(service: StackService, task: Task): Promise<CliError> {
  const ps = await dockerCli(["service", "ps", "--no-trunc", service.name]);
  // The failing task's own lines (`docker service logs` takes a task too): the reason is there, once.
  const logs = await dockerCli(["service", "logs", "--raw", "--tail", "15", task.ID]);
  const why = task.Status.Err ?? task.Status.Message ?? task.Status.State;
  return new CliError(
    `the ${service.service} service failed to start (${why}); docker service ps --no-trunc ${service.name}:\n` +
      `${ps.output.trim().split("\n").slice(0, 8).join("\n")}\nthe last lines of task ${task.ID}:\n${logs.output.trim()}`,
  );
}

/** Waits until every service runs all its tasks and the edge answers /v1/health; a failing task fails the start. */
async function waitHealthy(paths: SelfHostPaths, state: SelfHostState, since: string, progress: Progress) {
  const stack = stackName(paths);
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const services = await stackServices(stack);
    for (const service of services) {
      const task = failingTask(await serviceTasks(service.name), since);
      if (task) throw await failure(service, task);
    }
    const waiting = services.filter((s) => s.desired === 0 || s.running < s.desired);
    if (services.length >= 3 && waiting.length === 0 && (await probeHealth(localOrigin(state)))) return;
    const names = waiting.map((s) => `${s.service} (${s.replicas})`).join(", ");
    progress(`waiting for ${names || "the edge to answer"}…`);
    await sleep(500);
  }
  throw new CliError(
    `the stack did not become healthy within ${START_TIMEOUT_MS / 1000}s; see 'svc self-host status' and 'svc self-host logs'`,
  );
}

/**
 * The stack's images, built where missing: compose.yaml's build sections, as compose mode runs them; the stack file
 * names the images by the same variables (SVC_POSTGRES_IMAGE, SVC_API_TAG, …), which this returns.
 */
export async function swarmImages(
  paths: SelfHostPaths,
  state: SelfHostState,
  progress: Progress,
): Promise<Record<string, string>> {
  const build = { ...composeRun(paths, state), files: [composeFiles(paths)[0]!] };
  const chosen = Object.fromEntries(IMAGE_VARIABLES.flatMap((k) => (state.env[k] ? [[k, state.env[k]]] : [])));
  return ensureComposeImages(build, chosen, progress);
}

/**
 * Deploys compose/stack.yaml with this home's generated file on the Swarm this engine manages: the images built
 * first as compose mode builds them, then `docker stack deploy`, then the wait for every task and the edge. Never
 * initialises a swarm: an engine that is not a manager fails the start with what to run.
 */
export async function startSwarm(
  paths: SelfHostPaths,
  state: SelfHostState,
  progress: Progress,
  deps: SwarmDeps = {},
): Promise<void> {
  const node = await requireSwarmManager(deps.manager);
  if (!state.postgres_password) {
    state.postgres_password = randomBytes(24).toString("base64url");
    writeState(paths, state);
  }
  for (const [key, value] of Object.entries(SET_BY_STACK)) {
    if (state.env[key] && state.env[key] !== value)
      warn(`${key}=${state.env[key]} is ignored: swarm mode runs ${value}`);
  }
  const images = await swarmImages(paths, state, progress);
  const stack = stackName(paths);
  const [file, override] = stackFiles(paths);
  writeStackOverride(override, overrideInput(state, stack, node.nodeId));
  progress(`deploying the stack ${stack}: postgres, ${state.api_replicas} api, edge…`);
  // The engine's clock, as the tasks' CreatedAt: the tasks of this deploy, not those of an earlier one.
  const since = new Date(Date.now() - 1000).toISOString();
  const deployed = await dockerCli(
    // Local images: no registry is asked for their digests (none may answer), and each node uses what it has.
    ["stack", "deploy", "--resolve-image", "never", "--prune", "-c", file, "-c", override, stack],
    { ...stackEnv(paths, state), ...images },
  );
  if (deployed.code !== 0) {
    throw new CliError(`docker stack deploy failed:\n${deployed.output.trim().split("\n").slice(-20).join("\n")}`);
  }
  await waitHealthy(paths, state, since, progress);
}

export type SwarmStopResult = { stack: string; services_removed: string[]; networks_left: string[] };

/**
 * Removes the stack's services and networks (`docker stack rm`) and the services its APIs made (sandboxes and apps,
 * by their installation label), and waits until their networks are gone; the volumes stay. Sessions are stopped
 * through the API before this (stop.ts): their services would otherwise go from under them.
 */
export async function stopSwarm(paths: SelfHostPaths, state: SelfHostState): Promise<SwarmStopResult> {
  const stack = stackName(paths);
  const services = await stackServices(stack);
  // First the stack: its API would otherwise start sandboxes (a warm pool's) while theirs are being removed.
  if (services.length > 0) {
    const removed = await dockerCli(["stack", "rm", stack]);
    if (removed.code !== 0) throw new CliError(`docker stack rm failed:\n${removed.output.trim()}`);
  }
  const made = await removeInstallationServices(installationIds(state));
  const left = await removeNetworks([`${STACK_LABEL}=${stack}`]);
  if (left.length > 0) warn(`the stack's networks ${left.join(", ")} are still in use; 'docker network rm' them later`);
  return { stack, services_removed: [...services.map((s) => s.name), ...made], networks_left: left };
}
