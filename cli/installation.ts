import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { packageRoot } from "../protocol/package-root.ts";
import { readCliEnv } from "./config.ts";
import { CliError } from "./errors.ts";

/** Installed from a git checkout by its scripts/install.sh: the shim runs the checkout's bin/svc.js. */
const CheckoutRecord = z.object({
  kind: z.literal("checkout"),
  checkout: z.string().min(1),
  script: z.string().min(1),
  shim: z.string().min(1),
  node: z.string().min(1),
  installed_at: z.string(),
});

/** Installed by the script an API serves (`curl -fsSL <origin>/install.sh | bash`): one file under the prefix. */
const ServedRecord = z.object({
  kind: z.literal("served"),
  origin: z.url(),
  /** `<origin>/install.sh`: what the shim's marker line names. */
  script: z.string().min(1),
  prefix: z.string().min(1),
  binary: z.string().min(1),
  shim: z.string().min(1),
  node: z.string().min(1),
  version: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  installed_at: z.string(),
});
export type ServedRecord = z.infer<typeof ServedRecord>;

/** `$SVC_HOME/install.json`, written by the install scripts; a record from before `kind` existed is a checkout's. */
export const InstallRecord = z.preprocess(
  (value) => (value && typeof value === "object" && !("kind" in value) ? { ...value, kind: "checkout" } : value),
  z.discriminatedUnion("kind", [CheckoutRecord, ServedRecord]),
);
export type InstallRecord = z.infer<typeof InstallRecord>;

/** What update and uninstall act on; a checkout installed before records existed has no known shim or node. */
export type Installation =
  | ServedRecord
  | { kind: "checkout"; checkout: string; script: string; shim?: string; node?: string };

export const installRecordPath = (home: string) => join(home, "install.json");

export function readInstallRecord(home: string): InstallRecord | undefined {
  const path = installRecordPath(home);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const parsed = InstallRecord.safeParse(JSON.parse(text));
  if (!parsed.success) throw new CliError(`${path} is damaged: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

/** The record when there is one, else the checkout this CLI runs from (installed before records existed). */
export function currentInstallation(home: string): Installation {
  const record = readInstallRecord(home);
  if (record) return record;
  const missing = `no install record in ${home}: install with 'curl -fsSL <svc host>/install.sh | bash' or a checkout's scripts/install.sh`;
  let checkout: string;
  try {
    checkout = packageRoot();
  } catch {
    // A served CLI is one file with no package around it: without its record, nothing says where it came from.
    throw new CliError(missing);
  }
  const script = join(checkout, "scripts", "install.sh");
  if (!existsSync(script)) throw new CliError(missing);
  return { kind: "checkout", checkout, script };
}

/** The shim's second line names the script that wrote it: the only files svc ever deletes from a bin directory. */
function isShimOf(path: string, script: string): boolean {
  try {
    return readFileSync(path, "utf8").split("\n")[1] === `# svc shim, written by ${script}`;
  } catch {
    return false;
  }
}

/**
 * The shims of this installation: the recorded one and those in the directories the script may choose, which with
 * SVC_BIN_DIR set is that one alone (the machine's own shims are no business of an uninstall run that way).
 */
export function shimsOf(installation: Installation, binDir = readCliEnv().binDir): string[] {
  const dirs = binDir ? [binDir] : ["/usr/local/bin", join(homedir(), ".local", "bin")];
  const candidates = [installation.shim, ...dirs.map((dir) => join(dir, "svc"))];
  const unique = [...new Set(candidates.filter((c): c is string => Boolean(c)))];
  return unique.filter((path) => isShimOf(path, installation.script));
}
