import { StoppedSessions } from "../../../protocol/admin.ts";
import { createApiClient } from "../../api-client.ts";
import { CliError } from "../../errors.ts";
import { info, warn } from "../../output.ts";
import { stopCompose } from "./compose-mode.ts";
import { probeHealth, sleep } from "./health.ts";
import { EngineUnavailable, installationIds, learnInstallation, removeIdleNetworks } from "./installation-objects.ts";
import { clearPid, isAlive, readPid } from "./process.ts";
import { runningMode } from "./running-mode.ts";
import { ensureState, localOrigin, type SelfHostState, type StackMode, selfHostPaths } from "./state.ts";
import { stopSwarm } from "./swarm-mode.ts";

const GRACE_MS = 15_000;

export type StopResult = {
  stopped: boolean;
  mode: StackMode | null;
  pid: number | null;
  sessions_stopped: number;
  /** The installation's sandbox networks removed: those no sandbox (nor app) of it is left on. */
  networks_removed: string[];
  /** swarm mode only: the services removed, the stack's and those its API made (sandboxes, apps). */
  services_removed?: string[];
};

/**
 * Once nothing of this home runs: the sandbox networks of its installations that no container of theirs is on. A
 * sandbox left running (adopted at the next start) keeps its network. Quiet when no engine answers: no sandbox either.
 */
async function removeNetworks(state: SelfHostState): Promise<string[]> {
  try {
    return await removeIdleNetworks(installationIds(state));
  } catch (err) {
    if (!(err instanceof EngineUnavailable)) warn(`the sandbox networks stay: ${(err as Error).message}`);
    return [];
  }
}

const plural = (n: number, one: string, many: string) => (n === 1 ? one : many);

/**
 * Stops every live session of the stack, every account's, through its API while it still answers (sandbox removed,
 * branch and record kept). The API stops the sessions of its own database: another stack's sandboxes on the same
 * engine are never touched, and no container is picked by its labels here.
 */
async function stopSessions(origin: string, token: string): Promise<number> {
  const api = createApiClient({ baseUrl: origin, token });
  return (await api.request("POST", "/v1/admin/sessions/stop", StoppedSessions)).stopped.length;
}

async function stopProcess(pid: number): Promise<void> {
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + GRACE_MS;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  if (isAlive(pid)) {
    process.kill(pid, "SIGKILL");
    while (isAlive(pid)) await sleep(50);
  }
}

/**
 * Stops the stack. Running sessions keep their sandboxes unless `sandboxes` is set: the next start adopts them, so a
 * restart (an upgrade, a new setting) does not cut an agent off mid-task.
 */
export async function stopSelfHost(options: { sandboxes?: boolean } = {}): Promise<StopResult> {
  const paths = selfHostPaths();
  const state = ensureState(paths);
  const mode = await runningMode(paths);
  if (!mode) {
    clearPid(paths);
    info("svc self-host is not running");
    const networks = await removeNetworks(state);
    return { stopped: false, mode: null, pid: null, sessions_stopped: 0, networks_removed: networks };
  }
  let sessionsStopped = 0;
  const origin = localOrigin(state);
  const answers = await probeHealth(origin);
  // Which installation this is, for the networks below (a stack started by an older svc never said).
  if (answers) await learnInstallation(paths, state, mode);
  // Swarm mode leaves nothing behind, sandbox services included: their sessions are stopped first, work saved.
  const sandboxes = options.sandboxes || mode === "swarm";
  // A stop asked for stops the stack even when its sessions could not be: the error comes after, and they keep
  // their sandboxes for the next start to adopt.
  let sessionsRefused: Error | undefined;
  if (sandboxes && answers) {
    try {
      sessionsStopped = await stopSessions(origin, state.admin_token);
      info(`stopped ${sessionsStopped} running session${sessionsStopped === 1 ? "" : "s"} and their sandboxes`);
    } catch (err) {
      sessionsRefused = err as Error;
    }
  } else if (mode === "swarm") {
    warn(`the API does not answer at ${origin}: running sessions' sandbox services are removed unsaved`);
  } else if (sandboxes) {
    warn(`the API does not answer at ${origin}: running sessions keep their sandboxes (the next start adopts them)`);
  }
  const pid = mode === "embedded" ? (readPid(paths) ?? null) : null;
  let done = "compose services stopped; volumes kept";
  let services: string[] | undefined;
  if (pid) {
    await stopProcess(pid);
    done = `pid ${pid}`;
  } else if (mode === "swarm") {
    const swarm = await stopSwarm(paths, state);
    services = swarm.services_removed;
    const n = services.length;
    done = `stack ${swarm.stack} removed, ${n} ${plural(n, "service", "services")}; volumes kept`;
  } else await stopCompose(paths, state);
  clearPid(paths);
  const networks = await removeNetworks(state);
  info(`✓ svc self-host stopped (${done})`);
  if (networks.length > 0) {
    info(
      `  removed the sandbox ${plural(networks.length, "network", "networks")} ${networks.join(", ")} ` +
        `(no sandbox left on ${plural(networks.length, "it", "them")})`,
    );
  }
  if (sessionsRefused) {
    throw new CliError(
      `the stack stopped, but its running sessions could not be (${sessionsRefused.message.split("\n")[0]}): ` +
        "they keep their sandboxes, which the next start adopts",
    );
  }
  return {
    stopped: true,
    mode,
    pid,
    sessions_stopped: sessionsStopped,
    networks_removed: networks,
    ...(services ? { services_removed: services } : {}),
  };
}
