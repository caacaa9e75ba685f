import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Command } from "commander";
import { readCliEnv } from "../config.ts";
import { CliError } from "../errors.ts";
import { currentInstallation } from "../installation.ts";
import { info, printJson } from "../output.ts";
import { isAlive, readPid } from "./self-host/process.ts";
import { selfHostPaths } from "./self-host/state.ts";
import { updateServed } from "./update-served.ts";

/** Runs one step with its output on stderr (stdout carries only the result) and the terminal on stdin (sudo). */
function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): number {
  return spawnSync(command, args, { stdio: ["inherit", 2, 2], env }).status ?? 1;
}

function gitLine(checkout: string, args: string[]): string | undefined {
  const res = spawnSync("git", ["-C", checkout, ...args], { encoding: "utf8" });
  return res.status === 0 ? res.stdout.trim() || undefined : undefined;
}

export async function updateSvc(options: { json?: boolean }): Promise<void> {
  const paths = selfHostPaths();
  const installation = currentInstallation(paths.home);
  if (installation.kind === "served") return updateServed(installation, paths.home, options);
  const { checkout, script, shim, node } = installation;
  if (!existsSync(script)) throw new CliError(`${script} is gone; install again with a checkout's scripts/install.sh`);
  const from = gitLine(checkout, ["rev-parse", "HEAD"]);
  const upstream = gitLine(checkout, ["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"]);
  if (upstream) {
    info(`pulling ${upstream} into ${checkout} (fast-forward only)…`);
    if (run("git", ["-C", checkout, "pull", "--ff-only"]) !== 0) {
      throw new CliError(`git pull --ff-only failed in ${checkout}; nothing was re-installed`);
    }
  } else {
    info(`${checkout} has no upstream branch to pull from; re-installing it as it is`);
  }

  const pid = readPid(paths);
  const wasRunning = pid !== undefined && isAlive(pid);
  // The same node and shim directory as the first install (unless the caller names another directory), and the
  // stack's remembered port.
  const nodeBin = node ?? process.execPath;
  const env = {
    ...process.env,
    PATH: `${dirname(nodeBin)}:${process.env.PATH ?? ""}`,
    SVC_BIN_DIR: readCliEnv().binDir ?? (shim && dirname(shim)),
    SVC_INSTALL_PORT: undefined,
  };
  const code = run("bash", [script], env);
  if (code !== 0) throw new CliError(`${script} failed (exit ${code}); see its output above`);

  // The script leaves a running stack alone; restart it with the new CLI so the new code serves.
  if (wasRunning) {
    const cli = join(checkout, "bin", "svc.js");
    if (run(nodeBin, [cli, "self-host", "restart"], env) !== 0)
      throw new CliError("the new version is installed but the stack did not restart; see above");
  }
  const to = gitLine(checkout, ["rev-parse", "HEAD"]);
  const version = JSON.parse(readFileSync(join(checkout, "package.json"), "utf8")).version as string;
  const result = { version, checkout, script, upstream: upstream ?? null, from: from ?? null, to: to ?? null };
  if (options.json) {
    printJson({ ...result, restarted: wasRunning });
    return;
  }
  const moved = from === to ? "already at the newest commit" : `${from?.slice(0, 7)} → ${to?.slice(0, 7)}`;
  info(`✓ svc ${version} updated from ${checkout} (${moved})${wasRunning ? "; the stack restarted" : ""}`);
}

export function updateCommand(): Command {
  return new Command("update")
    .description(
      "re-run the install script: from the host that served it, or after pulling the checkout svc was installed from",
    )
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => updateSvc(opts));
}
