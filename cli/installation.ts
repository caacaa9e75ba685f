import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { packageRoot } from "../protocol/package-root.ts";
import { CliError } from "./errors.ts";

/** `$SVC_HOME/install.json`, written by scripts/install.sh: where this installation came from. */
export const InstallRecord = z.object({
  checkout: z.string().min(1),
  script: z.string().min(1),
  shim: z.string().min(1),
  node: z.string().min(1),
  installed_at: z.string(),
});
export type InstallRecord = z.infer<typeof InstallRecord>;

/** What update and uninstall act on; `shim` and `node` are known only from a record. */
export type Installation = { checkout: string; script: string; shim?: string; node?: string };

export const installRecordPath = (home: string) => join(home, "install.json");

function readInstallRecord(home: string): InstallRecord | undefined {
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
  const checkout = packageRoot();
  const script = join(checkout, "scripts", "install.sh");
  if (!existsSync(script)) {
    throw new CliError(
      `no install record in ${home} and no install script next to this svc; install with scripts/install.sh`,
    );
  }
  return { checkout, script };
}

/** The shim's second line names the script that wrote it: the only files svc ever deletes from a bin directory. */
function isShimOf(path: string, script: string): boolean {
  try {
    return readFileSync(path, "utf8").split("\n")[1] === `# svc shim, written by ${script}`;
  } catch {
    return false;
  }
}

/** The shims of this installation: the recorded one and those in the directories the script may choose. */
export function shimsOf(installation: Installation): string[] {
  const candidates = [
    installation.shim,
    process.env.SVC_BIN_DIR && join(process.env.SVC_BIN_DIR, "svc"),
    "/usr/local/bin/svc",
    join(homedir(), ".local", "bin", "svc"),
  ];
  const unique = [...new Set(candidates.filter((c): c is string => Boolean(c)))];
  return unique.filter((path) => isShimOf(path, installation.script));
}
