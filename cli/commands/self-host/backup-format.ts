import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { z } from "zod";
import { BackupRepositories, BackupRepository } from "../../../protocol/admin.ts";
import { CliError } from "../../errors.ts";
import { StackMode } from "./state.ts";

/**
 * A backup file (`svc self-host backup <file>`): a tar.gz holding one directory, `svc-backup/`, with
 *   manifest.json            this description
 *   settings.json            the secrets key and the stack's settings (port, address, mode, `env set` values)
 *   database/pglite.tar.gz   embedded mode: PGlite's own dump of its data directory
 *   database/postgres.sql    compose mode: pg_dump's, taken in the postgres container
 *   repositories/<project id>.bundle   each managed repository with refs, as `git bundle create --all` makes it
 * Never in it: the admin token, the PostgreSQL password, the installation ids: a restore makes new ones.
 */
export const BACKUP_DIR = "svc-backup";
export const BACKUP_FORMAT = "svc-self-host-backup/1";

export const BackupManifest = z.object({
  format: z.literal(BACKUP_FORMAT),
  created_at: z.string(),
  svc_version: z.string(),
  mode: StackMode,
  /** The backed-up stack's installation: what a restored stack's first start replaces with an id of its own. */
  source_installation: z.uuid(),
  database: z.object({ kind: z.enum(["pglite", "postgres"]), file: z.string(), bytes: z.number().int() }),
  repositories: z.array(BackupRepository),
  counts: BackupRepositories.shape.counts,
});
export type BackupManifest = z.infer<typeof BackupManifest>;

export const BackupSettings = z.object({
  /** The key the secrets are encrypted with: without it no restored secret decrypts. */
  secrets_key: z.string().min(40),
  port: z.number().int().min(1).max(65535),
  listen: z.string().min(1),
  mode: StackMode,
  api_replicas: z.number().int().min(1).max(8),
  env: z.record(z.string(), z.string()),
  wizard_done: z.boolean(),
});
export type BackupSettings = z.infer<typeof BackupSettings>;

/**
 * Runs the system's `tar` (GNU or bsdtar) with `args`; `output`: a file that becomes its stdout (created 0600).
 * Throws with tar's own words when it fails.
 */
export function tar(args: string[], options: { output?: string } = {}): Promise<void> {
  return new Promise((done, fail) => {
    const output = options.output ? openSync(options.output, "w", 0o600) : "ignore";
    const child = spawn("tar", args, { stdio: ["ignore", output, "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (data: Buffer) => {
      stderr += data.toString("utf8");
    });
    const close = () => typeof output === "number" && closeSync(output);
    child.on("error", (err) => {
      close();
      fail(new CliError(`cannot run tar: ${err.message}`));
    });
    child.on("close", (code) => {
      close();
      // GNU tar says so when it strips a leading `/` (PGlite's dump names its files that way): not a failure.
      const said = stderr
        .split("\n")
        .filter((l) => l && !/Removing leading/.test(l))
        .join("\n");
      if (code === 0) done();
      else fail(new CliError(`tar ${args[0]} failed (${code}): ${said.trim() || "no message"}`));
    });
  });
}

/** `1 project`, `3 projects`. */
export const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** `5.3 MB`, `812 kB`, `17 B`. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(1)} GB`;
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${Math.round(bytes / 1e3)} kB`;
  return `${bytes} B`;
}
