import {
  chmodSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { BackupRepositories } from "../../../protocol/admin.ts";
import { VERSION } from "../../../protocol/version.ts";
import { type ApiClient, createApiClient } from "../../api-client.ts";
import { CliError } from "../../errors.ts";
import { info } from "../../output.ts";
import {
  BACKUP_DIR,
  BACKUP_FORMAT,
  type BackupManifest,
  type BackupSettings,
  count,
  formatBytes,
  tar,
} from "./backup-format.ts";
import { composeWithFiles } from "./compose.ts";
import { composeRun } from "./compose-mode.ts";
import { runningMode } from "./running-mode.ts";
import { localOrigin, readState, type SelfHostPaths, type SelfHostState, selfHostPaths } from "./state.ts";
import { swarmPgDump } from "./swarm-backup.ts";

export type BackupResult = {
  file: string;
  bytes: number;
  mode: BackupManifest["mode"];
  source_installation: string;
  database: BackupManifest["database"];
  repositories: { project_id: string; slug: string; refs: number; bytes: number }[];
  counts: BackupManifest["counts"];
  secrets_key: true;
  settings: string[];
};

const Installation = z.object({ id: z.uuid() });

/** A binary answer of the API written to `file` (0600) as it arrives; its size. */
async function download(api: ApiClient, path: string, file: string): Promise<number> {
  const body = await api.download(path);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  await pipeline(body, createWriteStream(file, { mode: 0o600 }));
  return statSync(file).size;
}

/** Compose mode: PostgreSQL's own dump, taken by pg_dump inside the postgres container (one snapshot). Swarm mode's:
 * swarm-backup.ts. */
async function pgDump(paths: SelfHostPaths, state: SelfHostState, file: string): Promise<number> {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const dump = await composeWithFiles(
    composeRun(paths, state),
    ["exec", "-T", "postgres", "pg_dump", "-U", "svc", "-d", "svc", "--no-owner", "--no-privileges"],
    { output: file },
  );
  if (dump.code !== 0) throw new CliError(`pg_dump failed in the postgres container: ${dump.stderr.trim()}`);
  return statSync(file).size;
}

/**
 * `svc self-host backup <file>`: everything a restore needs to serve the same projects, CRs, secrets and
 * repositories, taken while the stack runs. The database first (embedded: PGlite's dump through the API, taken
 * between two transactions; compose and swarm: pg_dump), then each managed repository as a bundle (git reads its refs, then
 * packs what they reach): a repository read after the database holds every commit the database names. Then the
 * secrets key and the settings. One tar.gz, mode 0600, written under a temporary name and renamed when complete.
 */
export async function backupSelfHost(file: string, options: { force?: boolean } = {}): Promise<BackupResult> {
  const paths = selfHostPaths();
  const state = readState(paths);
  if (!state) throw new CliError(`no self-host stack in ${paths.home} (SVC_HOME): nothing to back up`);
  const mode = await runningMode(paths);
  if (!mode) {
    throw new CliError(
      `the stack in ${paths.home} is not running; a backup is taken through it: start it with 'svc self-host start'`,
    );
  }
  const target = resolve(file);
  if (existsSync(target) && !options.force) throw new CliError(`${target} exists: choose another file or add --force`);
  if (!existsSync(dirname(target))) throw new CliError(`${dirname(target)} does not exist`);

  const api = createApiClient({ baseUrl: localOrigin(state), token: state.admin_token });
  const installation = await api.request("GET", "/v1/admin/installation", Installation);
  info(`backing up the ${mode} stack at ${api.baseUrl} (installation ${installation.id})…`);
  // Beside the target: the finished archive is renamed into place, never copied across file systems.
  const staging = mkdtempSync(join(dirname(target), `.${basename(target)}.`));
  let database: BackupManifest["database"];
  let listed: BackupRepositories;
  const repositories: BackupResult["repositories"] = [];
  try {
    const root = join(staging, BACKUP_DIR);
    mkdirSync(root, { mode: 0o700 });
    database =
      mode === "embedded"
        ? {
            kind: "pglite",
            file: "database/pglite.tar.gz",
            bytes: await download(api, "/v1/admin/backup/database", join(root, "database", "pglite.tar.gz")),
          }
        : {
            kind: "postgres",
            file: "database/postgres.sql",
            bytes:
              mode === "swarm"
                ? await swarmPgDump(paths, join(root, "database", "postgres.sql"))
                : await pgDump(paths, state, join(root, "database", "postgres.sql")),
          };
    listed = await api.request("GET", "/v1/admin/backup/repositories", BackupRepositories);
    for (const repo of listed.repositories) {
      const bytes =
        repo.refs === 0
          ? 0
          : await download(
              api,
              `/v1/admin/backup/repositories/${repo.project_id}/bundle`,
              join(root, "repositories", `${repo.project_id}.bundle`),
            );
      repositories.push({ project_id: repo.project_id, slug: repo.slug, refs: repo.refs, bytes });
    }
    const settings: BackupSettings = {
      secrets_key: state.secrets_key,
      port: state.port,
      listen: state.listen,
      mode: state.mode,
      api_replicas: state.api_replicas,
      env: state.env,
      wizard_done: state.wizard_done,
    };
    await writeFile(join(root, "settings.json"), `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      created_at: new Date().toISOString(),
      svc_version: VERSION,
      mode,
      source_installation: installation.id,
      database,
      repositories: listed.repositories,
      counts: listed.counts,
    };
    await writeFile(join(root, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    const partial = join(staging, "backup.tar.gz");
    await tar(["-czf", "-", "-C", staging, BACKUP_DIR], { output: partial });
    chmodSync(partial, 0o600);
    renameSync(partial, target);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  const bytes = statSync(target).size;
  const result: BackupResult = {
    file: target,
    bytes,
    mode,
    source_installation: installation.id,
    database,
    repositories,
    counts: listed.counts,
    secrets_key: true,
    settings: Object.keys(state.env).sort(),
  };
  report(result);
  return result;
}

function report(r: BackupResult): void {
  const { projects, change_requests, secrets, sessions } = r.counts;
  info(
    `  database      ${r.database.kind === "pglite" ? "embedded PGlite, its own dump" : "PostgreSQL, pg_dump"} ` +
      `(${formatBytes(r.database.bytes)}): ${count(projects, "project")}, ${count(change_requests, "CR")}, ` +
      `${count(secrets, "secret")}, ${count(sessions, "session")}`,
  );
  info(`  repositories  ${r.repositories.length} managed, as git bundles`);
  for (const repo of r.repositories) {
    info(`                ${repo.slug} (${repo.project_id}): ${count(repo.refs, "ref")}, ${formatBytes(repo.bytes)}`);
  }
  info("  secrets key   the key the secrets are encrypted with (a restore decrypts them with it)");
  info(
    `  settings      port, address, mode${r.settings.length ? `, ${r.settings.join(", ")}` : ""} ` +
      "(not the admin token: a restore makes a new one)",
  );
  info(`✓ wrote ${r.file} (${formatBytes(r.bytes)}, mode 0600); it holds the secrets key: keep it safe`);
}
