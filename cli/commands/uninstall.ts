import { rmdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { createInterface } from "node:readline/promises";
import { Command } from "commander";
import { readCliEnv } from "../config.ts";
import { configPath } from "../config-file.ts";
import { CliError, usageError } from "../errors.ts";
import { currentInstallation, installRecordPath, shimsOf } from "../installation.ts";
import { info, printJson } from "../output.ts";
import { composeProject } from "./self-host/compose.ts";
import { removeComposeStack } from "./self-host/compose-mode.ts";
import { removeHostFirewall } from "./self-host/host-firewall.ts";
import { runningMode } from "./self-host/running-mode.ts";
import { readState, selfHostPaths } from "./self-host/state.ts";
import { stopSelfHost } from "./self-host/stop.ts";

export type UninstallOptions = { keepHome?: boolean; keepAuth?: boolean; yes?: boolean; json?: boolean };

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

function remove(path: string): void {
  try {
    rmSync(path, { recursive: true, force: true });
  } catch (err) {
    throw new CliError(`cannot remove ${path}: ${(err as Error).message}`);
  }
}

export async function uninstallSvc(options: UninstallOptions): Promise<void> {
  const paths = selfHostPaths();
  const installation = currentInstallation(paths.home);
  const shims = shimsOf(installation);
  const config = configPath();
  const doomed = [
    ...shims,
    ...(installation.kind === "served" ? [installation.binary] : []),
    ...(options.keepHome ? [] : [`${paths.home} (the stack's data)`]),
    ...(options.keepAuth ? [] : [`${config} (stored tokens)`]),
  ];
  if (!options.yes) {
    if (!process.stdin.isTTY) throw usageError("--yes is required when not interactive");
    const list = doomed.map((d) => `  ${d}\n`).join("");
    if (!(await confirm(`svc uninstall stops the stack and removes:\n${list}Continue? [y/N] `))) {
      throw new CliError("cancelled; nothing was removed");
    }
  }

  const wasRunning = (await runningMode(paths)) !== undefined;
  await stopSelfHost();
  // Compose mode's data is in Docker volumes rather than the home: it goes with the home.
  const state = readState(paths);
  if (!options.keepHome && state?.mode === "compose") await removeComposeStack(paths, state);
  // The host firewall: stop removed it with a running stack, one that died on its own left it.
  if (state?.mode === "compose") await removeHostFirewall(composeProject(paths), state.env);
  for (const shim of shims) remove(shim);
  if (installation.kind === "served") {
    remove(installation.binary);
    // The directories the script made for it go too when nothing else was put there (often they are the home).
    for (const dir of [dirname(installation.binary), installation.prefix]) {
      try {
        rmdirSync(dir);
      } catch {}
    }
  }
  remove(options.keepHome ? installRecordPath(paths.home) : paths.home);
  if (!options.keepAuth) {
    remove(config);
    // The default directory (~/.config/svc) is svc's own: gone too when nothing else was put there.
    if (!readCliEnv().configFile) {
      try {
        rmdirSync(dirname(config));
      } catch {}
    }
  }

  const result = {
    shims_removed: shims,
    home: { path: paths.home, removed: !options.keepHome },
    config: { path: config, removed: !options.keepAuth },
    stack_stopped: wasRunning,
    ...(installation.kind === "served" ? { binary: installation.binary } : { checkout: installation.checkout }),
  };
  if (options.json) printJson(result);
  else info(`✓ svc uninstalled: removed ${doomed.length ? doomed.join(", ") : "nothing"}`);
  if (installation.kind === "checkout") {
    info(`the checkout ${installation.checkout} stays; delete it yourself when you no longer need it`);
  }
}

export function uninstallCommand(): Command {
  return new Command("uninstall")
    .description("remove svc (its shim, and a served install's CLI file), stop the stack, remove its home and tokens")
    .option("--keep-home", "keep $SVC_HOME (default ~/.svc): the stack's data")
    .option("--keep-auth", "keep the CLI config file with the stored tokens")
    .option("--yes", "do not ask for confirmation (required when not interactive)")
    .option("--json", "output JSON")
    .action((opts: UninstallOptions) => uninstallSvc(opts));
}
