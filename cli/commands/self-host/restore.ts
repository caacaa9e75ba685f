import { randomBytes, randomUUID } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { RestorePlan } from "../../../protocol/admin.ts";
import { TOKEN_PREFIX } from "../../../protocol/token.ts";
import { CliError } from "../../errors.ts";
import { info, warn } from "../../output.ts";
import { BACKUP_DIR, BackupManifest, BackupSettings, count, formatBytes, tar } from "./backup-format.ts";
import { compose, composeProject, composeWithFiles, serviceContainers } from "./compose.ts";
import { prepareCompose, removeComposeStack } from "./compose-mode.ts";
import { dockerCall } from "./docker-engine.ts";
import { sleep } from "./health.ts";
import { composeObjects, EngineUnavailable } from "./installation-objects.ts";
import { runningMode } from "./running-mode.ts";
import { readState, type SelfHostPaths, type SelfHostState, selfHostPaths, writeState } from "./state.ts";
import { stackName, swarmVolumes } from "./swarm.ts";
import { restoreSwarmVolumes } from "./swarm-backup.ts";

export type RestoreResult = {
  home: string;
  mode: SelfHostState["mode"];
  /** The id the stack takes at its first start, in place of the backed-up one's. */
  installation: string;
  source_installation: string;
  repositories: number;
  counts: BackupManifest["counts"];
  port: number;
  /** What `--force` removed first. */
  replaced: string[];
};

/** Where the API of a compose stack keeps its data (images/api/Dockerfile: SVC_HOME; compose.yaml: the volume). */
const COMPOSE_API_HOME = "/var/lib/svc";
const POSTGRES_TIMEOUT_MS = 120_000;

const isEmptyDir = (dir: string) => !existsSync(dir) || readdirSync(dir).length === 0;

/**
 * What of a stack's data this home holds: the embedded database and repositories, the compose stack's volumes and
 * the swarm stack's (one name for both: they are the engine's volumes either way).
 */
async function heldData(paths: SelfHostPaths): Promise<{ embedded: string[]; composeVolumes: string[] }> {
  const data = join(paths.home, "data");
  const embedded = ["pglite", "repos", "restore"].filter((d) => !isEmptyDir(join(data, d))).map((d) => `data/${d}`);
  let composeVolumes: string[] = [];
  try {
    composeVolumes = (await composeObjects(composeProject(paths))).volumes;
    for (const volume of Object.values(swarmVolumes(stackName(paths)))) {
      const found = await dockerCall("GET", `/volumes/${encodeURIComponent(volume)}`, undefined, 30_000);
      if (!("error" in found) && found.status === 200 && !composeVolumes.includes(volume)) composeVolumes.push(volume);
    }
  } catch (err) {
    // No engine answers here: no compose stack's volume either.
    if (!(err instanceof EngineUnavailable)) throw err;
  }
  return { embedded, composeVolumes };
}

/** Reads and checks the archive's description and settings, extracted under `root`. */
function readBackup(root: string, file: string): { manifest: BackupManifest; settings: BackupSettings } {
  const read = (name: string) => {
    try {
      return JSON.parse(readFileSync(join(root, name), "utf8")) as unknown;
    } catch {
      throw new CliError(`${file} is not an svc self-host backup (no ${BACKUP_DIR}/${name} in it)`);
    }
  };
  const manifest = BackupManifest.safeParse(read("manifest.json"));
  if (!manifest.success) {
    throw new CliError(`${file} is not a backup this svc reads: ${manifest.error.issues[0]?.message}`);
  }
  const settings = BackupSettings.safeParse(read("settings.json"));
  if (!settings.success) throw new CliError(`${file} has damaged settings: ${settings.error.issues[0]?.message}`);
  return { manifest: manifest.data, settings: settings.data };
}

/** Waits for the compose stack's postgres to pass its health check. */
async function postgresHealthy(project: string): Promise<void> {
  const deadline = Date.now() + POSTGRES_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const pg = (await serviceContainers(project)).find((c) => c.service === "postgres");
    if (pg?.state === "running" && pg.health === "healthy") return;
    if (pg && (pg.state === "exited" || pg.state === "dead")) throw new CliError(`postgres stopped: ${pg.status}`);
    await sleep(500);
  }
  throw new CliError(`postgres did not become healthy within ${POSTGRES_TIMEOUT_MS / 1000}s`);
}

/**
 * Compose mode: the dump goes into a new PostgreSQL by psql inside its container, the plan and bundles into the
 * API's data volume (through the engine, into the API container created but not started). Services stopped after.
 */
async function restoreCompose(
  paths: SelfHostPaths,
  state: SelfHostState,
  root: string,
  staging: string,
  plan: RestorePlan,
): Promise<void> {
  const { up } = await prepareCompose(paths, state, (text) => info(`  ${text}`));
  const fail = (what: string, output: string) =>
    new CliError(`${what} failed:\n${output.trim().split("\n").slice(-20).join("\n")}`);
  info("  starting postgres alone to load the dump…");
  const pg = await compose(up, ["up", "-d", "postgres"]);
  if (pg.code !== 0) throw fail("compose up postgres", pg.output);
  try {
    await postgresHealthy(up.project);
    const load = await composeWithFiles(
      up,
      ["exec", "-T", "postgres", "psql", "-q", "-v", "ON_ERROR_STOP=1", "-U", "svc", "-d", "svc"],
      { input: join(root, "database", "postgres.sql") },
    );
    if (load.code !== 0) throw fail("loading the dump with psql", load.stderr);
    const created = await compose(up, ["up", "--no-start", "--no-deps", "api"]);
    if (created.code !== 0) throw fail("creating the api container", created.output);
    const api = (await serviceContainers(up.project)).find((c) => c.service === "api");
    if (!api) throw new CliError("compose created no api container");
    await putPlan(api.name, COMPOSE_API_HOME, staging, root, plan);
  } finally {
    await compose(up, ["stop"]);
  }
}

/** The plan and bundles (stagePlan) into the data directory of a container that mounts the API's data volume. */
async function putPlan(container: string, apiHome: string, staging: string, root: string, plan: RestorePlan) {
  const volume = join(staging, "volume");
  await stagePlan(join(volume, "data"), root, plan);
  const archive = join(staging, "volume.tar");
  await tar(["-cf", "-", "-C", volume, "data"], { output: archive });
  const put = await dockerCall(
    "PUT",
    `/containers/${encodeURIComponent(container)}/archive?path=${encodeURIComponent(apiHome)}`,
    readFileSync(archive),
    120_000,
  );
  if ("error" in put) throw new CliError(`the Docker engine did not answer: ${put.error}`);
  if (put.status !== 200)
    throw new CliError(`the engine refused the restore's files (HTTP ${put.status}): ${put.body}`);
}

/** The plan and the bundles, as `<data>/restore/` (protocol/admin.ts RestorePlan): the API adopts them at start. */
async function stagePlan(data: string, root: string, plan: RestorePlan): Promise<void> {
  const dir = join(data, "restore");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(data, 0o700);
  const bundles = join(root, "repositories");
  if (existsSync(bundles)) renameSync(bundles, join(dir, "repos"));
  await writeFile(join(dir, "restore.json"), `${JSON.stringify(plan, null, 2)}\n`, { mode: 0o600 });
}

/**
 * `svc self-host restore <file>`: a backup into this home (SVC_HOME), as a stack of its own. Refused while a stack
 * of this home runs; refused when the home holds a stack's data (a database, repositories, compose volumes) unless
 * `force`, which deletes that data first. The settings and the secrets key come from the backup; the admin token is
 * new, and the stack takes a new installation id at its first start (`svc self-host start`), so it never acts on the
 * original stack's containers, and the original's admin token does not open it.
 */
export async function restoreSelfHost(file: string, options: { force?: boolean } = {}): Promise<RestoreResult> {
  const source = resolve(file);
  if (!existsSync(source)) throw new CliError(`${source} does not exist`);
  const paths = selfHostPaths();
  const running = await runningMode(paths);
  if (running) {
    throw new CliError(
      `a ${running} stack runs from ${paths.home}: stop it first ('svc self-host stop'), or restore into another ` +
        "SVC_HOME",
    );
  }
  mkdirSync(paths.home, { recursive: true, mode: 0o700 });
  chmodSync(paths.home, 0o700);
  const existing = readState(paths);
  const held = await heldData(paths);
  const replaced = [...held.embedded, ...held.composeVolumes.map((v) => `volume ${v}`)];
  if (replaced.length > 0 && !options.force) {
    throw new CliError(
      `${paths.home} already holds a stack's data (${replaced.join(", ")}): restore into a fresh SVC_HOME, or add ` +
        "--force to delete that data and put the backup's in its place",
    );
  }

  const staging = mkdtempSync(join(paths.home, ".restore-"));
  try {
    await tar(["-xzf", source, "-C", staging]).catch((err: Error) => {
      throw new CliError(`${source} is not a readable backup: ${err.message}`);
    });
    const root = join(staging, BACKUP_DIR);
    const { manifest, settings } = readBackup(root, source);
    if (options.force) {
      for (const dir of ["pglite", "repos", "mirrors", "restore"]) {
        rmSync(join(paths.home, "data", dir), { recursive: true, force: true });
      }
      if (held.composeVolumes.length > 0 && existing) {
        // `down` reads the compose file, whose variables need a value, not the real one.
        await removeComposeStack(paths, {
          ...existing,
          postgres_password: existing.postgres_password ?? "x".repeat(16),
        });
      }
      for (const volume of (await heldData(paths)).composeVolumes) {
        const removed = await dockerCall("DELETE", `/volumes/${encodeURIComponent(volume)}`, undefined, 30_000);
        if ("error" in removed || (removed.status >= 300 && removed.status !== 404)) {
          throw new CliError(
            `cannot remove the volume ${volume}: ${"error" in removed ? removed.error : removed.body}`,
          );
        }
      }
    }
    if (existing && replaced.length === 0) warn(`the settings in ${paths.state} are replaced by the backup's`);
    const state: SelfHostState = {
      port: settings.port,
      listen: settings.listen,
      mode: manifest.mode,
      api_replicas: settings.api_replicas,
      env: settings.env,
      wizard_done: settings.wizard_done,
      secrets_key: settings.secrets_key,
      admin_token: TOKEN_PREFIX + randomBytes(32).toString("base64url"),
      // Compose: a new PostgreSQL with a password of its own (made by prepareCompose).
      postgres_password: undefined,
      // This home's earlier installations stay known: `svc uninstall` still finds what they left on the engine.
      installations: existing?.installations ?? [],
    };
    writeState(paths, state);
    const plan: RestorePlan = {
      format: 1,
      source_installation: manifest.source_installation,
      installation: randomUUID(),
      repositories: manifest.repositories,
    };
    info(`restoring a backup of ${manifest.created_at} (${manifest.mode} mode) into ${paths.home}…`);
    if (manifest.mode === "embedded") {
      const data = join(paths.home, "data");
      mkdirSync(data, { recursive: true, mode: 0o700 });
      // Unpacked beside the home's data, then moved in whole: a failure leaves no half database.
      const pglite = join(staging, "pglite");
      mkdirSync(pglite, { mode: 0o700 });
      await tar(["-xzf", join(root, manifest.database.file), "-C", pglite]);
      renameSync(pglite, join(data, "pglite"));
      await stagePlan(data, root, plan);
    } else if (manifest.mode === "swarm") {
      await restoreSwarmVolumes(
        paths,
        state,
        join(root, manifest.database.file),
        (container, apiHome) => putPlan(container, apiHome, staging, root, plan),
        (text) => info(`  ${text}`),
      );
    } else {
      await restoreCompose(paths, state, root, staging, plan);
    }
    const result: RestoreResult = {
      home: paths.home,
      mode: manifest.mode,
      installation: plan.installation,
      source_installation: plan.source_installation,
      repositories: plan.repositories.length,
      counts: manifest.counts,
      port: state.port,
      replaced: options.force ? replaced : [],
    };
    report(result, manifest);
    return result;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function report(r: RestoreResult, manifest: BackupManifest): void {
  const { projects, change_requests, secrets } = r.counts;
  if (r.replaced.length > 0) info(`  deleted first (--force): ${r.replaced.join(", ")}`);
  info(
    `  database      ${manifest.database.kind === "pglite" ? "embedded PGlite" : "PostgreSQL"} ` +
      `(${formatBytes(manifest.database.bytes)}): ${count(projects, "project")}, ${count(change_requests, "CR")}, ` +
      `${count(secrets, "secret")}`,
  );
  info(
    `  repositories  ${count(r.repositories, "managed repository", "managed repositories")}, taken in at the first start`,
  );
  info("  secrets key   the backup's: its secrets decrypt");
  info("  settings      the backup's; a new admin token");
  info(`  installation  ${r.installation} from the first start (the backup's was ${r.source_installation})`);
  info(
    `✓ restored into ${r.home}; start it with 'svc self-host start' (add --port <port> while the original still ` +
      `serves port ${r.port})`,
  );
}
