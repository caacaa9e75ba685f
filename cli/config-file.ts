import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { z } from "zod";
import { type CliSettings, readCliEnv } from "./config.ts";
import { CliError } from "./errors.ts";

export const HostName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9._-]*$/, "lowercase letters, digits, '.', '_' and '-' only");

/** A host as stored in the CLI config: the API origin (without `/v1`) and, once logged in, a token. */
const HostEntry = z.object({
  url: z.url(),
  token: z.string().optional(),
  /** The account `svc accounts use` chose for this login (its id); absent: the user's first. */
  account: z.string().optional(),
});

/** The CLI config file: which host is active, and every host the user added or logged in to. */
export const CliConfig = z.object({
  active_host: HostName.default("selfhost"),
  hosts: z.record(HostName, HostEntry).default({}),
});
export type CliConfig = z.infer<typeof CliConfig>;

export function configPath(env: CliSettings = readCliEnv()): string {
  if (env.configFile) return env.configFile;
  const base = env.xdgConfigHome ?? join(homedir(), ".config");
  return join(base, "svc", "config.json");
}

export function readConfig(path = configPath()): CliConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return CliConfig.parse({});
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError(`${path} is not valid JSON; fix or delete it`);
  }
  const config = CliConfig.safeParse(parsed);
  if (!config.success) throw new CliError(`${path} is not a valid svc config: ${config.error.issues[0]?.message}`);
  return config.data;
}

/** Writes atomically at mode 0600 in a 0700 directory: the file holds tokens. */
export function writeConfig(config: CliConfig, path = configPath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function updateConfig(change: (config: CliConfig) => void, path = configPath()): CliConfig {
  const config = readConfig(path);
  change(config);
  writeConfig(config, path);
  return config;
}
