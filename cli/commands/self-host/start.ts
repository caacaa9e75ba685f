import { chmodSync, mkdirSync } from "node:fs";
import { Me } from "../../../protocol/account.ts";
import { hashSecret } from "../../../protocol/credential.ts";
import { updateConfig } from "../../config-file.ts";
import { CliError } from "../../errors.ts";
import { info } from "../../output.ts";
import { probeHealth, sleep } from "./health.ts";
import { clearPid, isAlive, readPid, spawnApi, tailFile } from "./process.ts";
import { ensureState, localOrigin, type SelfHostPaths, selfHostPaths, writeState } from "./state.ts";
import { firstStartWizard } from "./wizard.ts";

const START_TIMEOUT_MS = 90_000;

export type StartOptions = { port?: number; listen?: string };
export type StartResult = { url: string; pid: number; port: number; listen: string; already_running: boolean };

/** Variables of the caller's shell that must not leak into the stack: its config comes from selfhost.json. */
function inheritedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("SVC_") && k !== "DATABASE_URL") env[k] = v;
  }
  return env;
}

async function registerHost(origin: string, token: string): Promise<void> {
  const res = await fetch(`${origin}/v1/accounts/me`, { headers: { authorization: `Bearer ${token}` } });
  if (!res.ok || !Me.safeParse(await res.json()).success) {
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

export async function startSelfHost(options: StartOptions): Promise<StartResult> {
  const paths = selfHostPaths();
  // The home holds the admin token, the secrets key and the data: its owner's alone, an existing one included.
  mkdirSync(paths.home, { recursive: true, mode: 0o700 });
  chmodSync(paths.home, 0o700);
  const state = ensureState(paths);
  await firstStartWizard(paths, state, options);
  const running = readPid(paths);
  if (running && isAlive(running)) {
    const origin = localOrigin(state);
    if (options.port && options.port !== state.port) {
      throw new CliError(`svc self-host is already running on port ${state.port}; stop it before changing the port`);
    }
    if (options.listen && options.listen !== state.listen) {
      throw new CliError(
        `svc self-host is already running on ${state.listen}; run 'svc self-host restart --listen ${options.listen}'`,
      );
    }
    if (await probeHealth(origin)) {
      await registerHost(origin, state.admin_token);
      info(`svc self-host is already running at ${origin} (pid ${running}); nothing to do`);
      return { url: origin, pid: running, port: state.port, listen: state.listen, already_running: true };
    }
    throw new CliError(
      `an API process (pid ${running}) is running but not answering at ${origin}; run 'svc self-host stop'`,
    );
  }
  if (running) clearPid(paths);

  if ((options.port && options.port !== state.port) || (options.listen && options.listen !== state.listen)) {
    state.port = options.port ?? state.port;
    state.listen = options.listen ?? state.listen;
    writeState(paths, state);
  }
  const origin = localOrigin(state);
  if (await probeHealth(origin, 500)) {
    throw new CliError(`port ${state.port} is already served by another svc API; pick another with --port`);
  }
  info(`starting svc self-host on ${state.listen}:${state.port} (data in ${paths.home})…`);
  const pid = spawnApi(paths, {
    ...inheritedEnv(),
    ...state.env,
    SVC_HOME: paths.home,
    SVC_PORT: String(state.port),
    SVC_LISTEN_HOST: state.listen,
    SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(state.admin_token),
    SVC_SECRETS_KEY: state.secrets_key,
  });
  await waitHealthy(paths, origin, pid);
  await registerHost(origin, state.admin_token);
  info(`✓ svc self-host running at ${origin} (pid ${pid}); host 'selfhost' is active and logged in`);
  if (state.listen === "0.0.0.0" || state.listen === "::") {
    info(`  it listens on every address: other machines reach it on port ${state.port}`);
  }
  return { url: origin, pid, port: state.port, listen: state.listen, already_running: false };
}
