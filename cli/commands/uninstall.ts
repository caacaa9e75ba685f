import { rmdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { createInterface } from "node:readline/promises";
import { Command } from "commander";
import { readCliEnv } from "../config.ts";
import { configPath } from "../config-file.ts";
import { CliError, usageError } from "../errors.ts";
import { currentInstallation, installRecordPath, shimsOf } from "../installation.ts";
import { info, printJson, warn } from "../output.ts";
import { composeProject } from "./self-host/compose.ts";
import { removeComposeStack } from "./self-host/compose-mode.ts";
import { removeHostFirewall } from "./self-host/host-firewall.ts";
import {
  composeObjects,
  containerName,
  EngineUnavailable,
  imagesOf,
  installationContainers,
  installationIds,
  learnInstallation,
  noObjects,
  type RemovedObjects,
  removeInstallations,
} from "./self-host/installation-objects.ts";
import { runningMode } from "./self-host/running-mode.ts";
import { readState, type SelfHostPaths, selfHostPaths } from "./self-host/state.ts";
import { stopSelfHost } from "./self-host/stop.ts";
import { removeSwarmVolumes, stackName } from "./self-host/swarm.ts";

export type UninstallOptions = {
  keepHome?: boolean;
  keepAuth?: boolean;
  keepImages?: boolean;
  yes?: boolean;
  json?: boolean;
};

/** What uninstall removed from the Docker engine, and which installations it looked for. */
type EngineResult = RemovedObjects & { installations: string[] };

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** `2 containers (a, b), 1 network (n)`: what a person reads of the engine's part. */
function describeEngine(removed: RemovedObjects): string {
  const parts: [string[], string][] = [
    [removed.containers, "container"],
    [removed.networks, "network"],
    [removed.volumes, "volume"],
    [removed.images, "image"],
  ];
  return parts
    .filter(([names]) => names.length > 0)
    .map(([names, kind]) => `${count(names.length, kind)} (${names.join(", ")})`)
    .join(", ");
}

/**
 * Everything of this home's stacks on the Docker engine: the installations' sandboxes, warm-pool members, apps,
 * networks and volumes (by their installation label), the compose stack's containers, network and (without
 * `keepHome`: they are its data) volumes, and unless `keepImages` the images they ran and built that no other
 * installation runs. `ran`: images seen before the stack stopped (its warm pool goes with it). Another installation's
 * objects are never touched.
 */
async function cleanEngine(paths: SelfHostPaths, options: UninstallOptions, ran: string[]): Promise<EngineResult> {
  const state = readState(paths);
  const ids = state ? installationIds(state) : [];
  const result: EngineResult = { installations: ids, ...noObjects() };
  if (!state) return result;
  try {
    const project = composeProject(paths);
    const before = await composeObjects(project);
    const compose = [...before.containers, ...before.networks, ...(options.keepHome ? [] : before.volumes)];
    if (compose.length > 0) {
      await removeComposeStack(paths, state, { volumes: !options.keepHome });
      const after = await composeObjects(project);
      result.containers.push(...before.containers.filter((c) => !after.containers.includes(c)));
      result.networks.push(...before.networks.filter((n) => !after.networks.includes(n)));
      result.volumes.push(...before.volumes.filter((v) => !after.volumes.includes(v)));
    }
    // Swarm mode's data volumes carry the stack's label, not the installation's: they go with the home too. The
    // stop before this removed the stack, so nothing holds them.
    if (!options.keepHome) result.volumes.push(...(await removeSwarmVolumes(stackName(paths))));
    // The host firewall: stop removed it with a running stack, one that died on its own left it.
    if (state.mode === "compose" || compose.length > 0) await removeHostFirewall(project, state.env);
    const images = [...ran, ...before.images, ...state.installations.flatMap((i) => i.images)];
    if (ids.length === 0 && images.length === 0) return result;
    const removed = await removeInstallations(ids, { images: !options.keepImages, ran: images });
    result.containers.push(...removed.containers);
    result.networks.push(...removed.networks);
    result.volumes.push(...removed.volumes);
    result.images.push(...removed.images);
    result.images_kept.push(...removed.images_kept);
  } catch (err) {
    if (!(err instanceof EngineUnavailable)) throw err;
    if (ids.length > 0) warn(`${err.message}: the stack's containers, networks and images there stay`);
  }
  return result;
}

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
    const engine = `the stack's containers, networks${options.keepHome ? "" : ", volumes"}${options.keepImages ? "" : " and images"} on the Docker engine`;
    const list = [...doomed, engine].map((d) => `  ${d}\n`).join("");
    if (!(await confirm(`svc uninstall stops the stack and removes:\n${list}Continue? [y/N] `))) {
      throw new CliError("cancelled; nothing was removed");
    }
  }

  const running = await runningMode(paths);
  const known = readState(paths);
  // Which installation it is (a stack started by an older svc never said), and what is on the engine before the stop:
  // the sandboxes its API stops and the warm pool a closing API takes with it are removed too, and counted.
  if (running && known) await learnInstallation(paths, known, running);
  const before = known ? await installationContainers(installationIds(known)).catch(() => []) : [];
  // Kept data keeps its sessions' records true (stopped, work saved); data about to go needs no such care.
  const stopped = await stopSelfHost({ sandboxes: Boolean(options.keepHome) });
  // Compose mode's data is in Docker volumes rather than the home: they go with the home (unless kept).
  const engine = await cleanEngine(paths, options, imagesOf(before));
  engine.containers = [...new Set([...before.map(containerName), ...engine.containers])];
  engine.networks = [...new Set([...stopped.networks_removed, ...engine.networks])];
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
    stack_stopped: running !== undefined,
    docker: engine,
    ...(installation.kind === "served" ? { binary: installation.binary } : { checkout: installation.checkout }),
  };
  if (options.json) printJson(result);
  else {
    const onEngine = describeEngine(engine);
    const removed = [doomed.join(", "), onEngine && `on the Docker engine ${onEngine}`].filter(Boolean).join("; ");
    info(`✓ svc uninstalled: removed ${removed || "nothing"}`);
    for (const kept of engine.images_kept) info(`  kept the image ${kept.image}: ${kept.reason}`);
  }
  if (installation.kind === "checkout") {
    info(`the checkout ${installation.checkout} stays; delete it yourself when you no longer need it`);
  }
}

export function uninstallCommand(): Command {
  return new Command("uninstall")
    .description(
      "remove svc (its shim, and a served install's CLI file), stop the stack, remove its home and tokens, and its " +
        "containers, networks, volumes and images on the Docker engine",
    )
    .option("--keep-home", "keep $SVC_HOME (default ~/.svc): the stack's data")
    .option("--keep-auth", "keep the CLI config file with the stored tokens")
    .option("--keep-images", "keep the images the stack built and ran (its sessions', apps' and its own)")
    .option("--yes", "do not ask for confirmation (required when not interactive)")
    .option("--json", "output JSON")
    .action((opts: UninstallOptions) => uninstallSvc(opts));
}
