import { chmodSync, mkdirSync } from "node:fs";
import { Me } from "../../../protocol/account.ts";
import { hashSecret } from "../../../protocol/credential.ts";
import { updateConfig } from "../../config-file.ts";
import { CliError } from "../../errors.ts";
import { httpRequest } from "../../http-client.ts";
import { info } from "../../output.ts";
import { createSpinner } from "../../spinner.ts";
import { composeProject } from "./compose.ts";
import { startCompose } from "./compose-mode.ts";
import { probeHealth, sleep } from "./health.ts";
import { installHostFirewall } from "./host-firewall.ts";
import { learnInstallation } from "./installation-objects.ts";
import { leaveMode } from "./mode-switch.ts";
import { callerEnv, clearPid, isAlive, readPid, spawnApi, tailFile } from "./process.ts";
import { runningMode } from "./running-mode.ts";
import { ensureState, localOrigin, type SelfHostPaths, type StackMode, selfHostPaths, writeState } from "./state.ts";
import { stopSelfHost } from "./stop.ts";
import { swarmVolumes } from "./swarm.ts";
import { startSwarm } from "./swarm-mode.ts";
import { firstStartWizard } from "./wizard.ts";

const START_TIMEOUT_MS = 90_000;

export type StartOptions = { port?: number; listen?: string; mode?: StackMode; apiReplicas?: number };
export type StartResult = {
  url: string;
  mode: StackMode;
  /** The API process in embedded mode; compose and swarm mode have containers instead. */
  pid: number | null;
  port: number;
  listen: string;
  already_running: boolean;
};

async function registerHost(origin: string, token: string): Promise<void> {
  const res = await httpRequest(`${origin}/v1/accounts/me`, { headers: { authorization: `Bearer ${token}` } });
  if (!res.ok || !Me.safeParse(JSON.parse(await res.text())).success) {
    throw new CliError(`the stack started but the admin token was refused (HTTP ${res.status})`);
  }
  updateConfig((config) => {
    config.hosts.selfhost = { url: origin, token };
    config.active_host = "selfhost";
  });
}

async function waitHealthy(paths: SelfHostPaths, origin: string, pid: number): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await probeHealth(origin)) return;
    if (!isAlive(pid)) {
      clearPid(paths);
      throw new CliError(`the API exited during start; last log lines:\n${tailFile(paths.apiLog, 20)}`);
    }
    await sleep(100);
  }
  throw new CliError(`the API did not become healthy within ${START_TIMEOUT_MS / 1000}s; see ${paths.apiLog}`);
}

/** Where a mode keeps its data, for the line a change of mode prints. */
function dataOf(mode: StackMode, paths: SelfHostPaths): string {
  if (mode === "embedded") return `in ${paths.home}/data`;
  const project = composeProject(paths);
  return mode === "compose"
    ? `in the Docker volumes ${project}_pgdata and ${project}_data`
    : `in the Docker volumes ${swarmVolumes(project).pgdata} and ${swarmVolumes(project).data}`;
}

/**
 * `leave`: on a change of mode, first stop what the other mode left running (see leaveMode); off for the start
 * leaveMode itself makes.
 */
export async function startSelfHost(
  options: StartOptions & { wizard?: boolean; leave?: boolean },
): Promise<StartResult> {
  const paths = selfHostPaths();
  // The home holds the admin token, the secrets key and the data: its owner's alone, an existing one included.
  mkdirSync(paths.home, { recursive: true, mode: 0o700 });
  chmodSync(paths.home, 0o700);
  let state = ensureState(paths);
  const current = await runningMode(paths);
  if (!current) await firstStartWizard(paths, state, options);
  if (current) {
    const origin = localOrigin(state);
    const restart = (running: string, flag: string) =>
      new CliError(`svc self-host is already running ${running}; run 'svc self-host restart ${flag}'`);
    if (options.mode && options.mode !== current) throw restart(`in ${current} mode`, `--mode ${options.mode}`);
    if (options.port && options.port !== state.port) throw restart(`on port ${state.port}`, `--port ${options.port}`);
    if (options.listen && options.listen !== state.listen) {
      throw restart(`on ${state.listen}`, `--listen ${options.listen}`);
    }
    if (options.apiReplicas && options.apiReplicas !== state.api_replicas) {
      throw restart(`with ${state.api_replicas} API replicas`, `--api-replicas ${options.apiReplicas}`);
    }
    const pid = current === "embedded" ? (readPid(paths) ?? null) : null;
    if (await probeHealth(origin)) {
      // Put back when lost (iptables rules do not survive a reboot; the containers come back on their own).
      if (current === "compose") await installHostFirewall(composeProject(paths), state.env);
      await registerHost(origin, state.admin_token);
      await learnInstallation(paths, state, current);
      info(`svc self-host is already running at ${origin} (${current} mode); nothing to do`);
      return { url: origin, mode: current, pid, port: state.port, listen: state.listen, already_running: true };
    }
    throw new CliError(`the ${current} stack is running but not answering at ${origin}; run 'svc self-host stop'`);
  }
  clearPid(paths);

  const next = {
    port: options.port ?? state.port,
    listen: options.listen ?? state.listen,
    mode: options.mode ?? state.mode,
    // Replicas are compose's and swarm's: a switch to embedded that names none runs the one API embedded mode has.
    api_replicas: options.apiReplicas ?? (options.mode === "embedded" ? 1 : state.api_replicas),
  };
  if (next.api_replicas > 1 && next.mode === "embedded") {
    throw new CliError("--api-replicas needs compose or swarm mode: add --mode compose (or --mode swarm)");
  }
  if (next.mode !== state.mode && options.leave !== false) {
    const left = state.mode;
    await leaveMode(paths, left, {
      start: () => startSelfHost({ mode: left, wizard: false, leave: false }),
      stop: () => stopSelfHost({ sandboxes: true }),
    });
    // That start and stop wrote the state (the mode, the installation): read again, or this start would undo it.
    state = ensureState(paths);
  }
  if (next.mode !== state.mode)
    info(`${next.mode} mode keeps its data ${dataOf(next.mode, paths)}, apart from the other modes'`);
  if (Object.entries(next).some(([k, v]) => state[k as keyof typeof next] !== v)) {
    Object.assign(state, next);
    writeState(paths, state);
  }
  const origin = localOrigin(state);
  if (await probeHealth(origin, 500)) {
    throw new CliError(`port ${state.port} is already served by another svc API; pick another with --port`);
  }
  let pid: number | null = null;
  if (state.mode === "compose" || state.mode === "swarm") {
    const swarm = state.mode === "swarm";
    // Swarm binds no single address: a port published in host mode is open on every address of the node.
    const where = swarm ? `port ${state.port} of this node's every address` : `${state.listen}:${state.port}`;
    info(`starting svc self-host in ${state.mode} mode on ${where}…`);
    const spinner = createSpinner();
    try {
      let last = "";
      const progress = (text: string) => {
        if (process.stderr.isTTY) spinner.update(text);
        else if (text !== last) info(`  ${text}`);
        last = text;
      };
      await (swarm ? startSwarm(paths, state, progress) : startCompose(paths, state, progress));
    } finally {
      spinner.stop();
    }
  } else {
    info(`starting svc self-host on ${state.listen}:${state.port} (data in ${paths.home})…`);
    pid = spawnApi(paths, {
      ...callerEnv(),
      ...state.env,
      SVC_HOME: paths.home,
      SVC_PORT: String(state.port),
      SVC_LISTEN_HOST: state.listen,
      SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(state.admin_token),
      SVC_SECRETS_KEY: state.secrets_key,
    });
    await waitHealthy(paths, origin, pid);
  }
  await registerHost(origin, state.admin_token);
  // Which installation the stack is: what stop, a change of mode and uninstall look for on the engine.
  await learnInstallation(paths, state, state.mode);
  info(
    `✓ svc self-host running at ${origin} (${pid ? `pid ${pid}` : `${state.mode} mode`}); host 'selfhost' is active and logged in`,
  );
  if (state.listen === "0.0.0.0" || state.listen === "::" || state.mode === "swarm") {
    info(`  it listens on every address: other machines reach it on port ${state.port}`);
  }
  return { url: origin, mode: state.mode, pid, port: state.port, listen: state.listen, already_running: false };
}
