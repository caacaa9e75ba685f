import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { GIT_ENV, runBuffered } from "./git-fixture.ts";

export { freePort } from "../../scripts/harness/ports.ts";

export const BIN = new URL("../../bin/svc.js", import.meta.url).pathname;

export type CliEnv = Record<string, string | undefined>;

/** Nothing of the developer's own svc session reaches a CLI a test runs. */
export const WITHOUT_SESSION = {
  SVC_CLI_TOKEN: undefined,
  SVC_EXECUTOR_TOKEN: undefined,
  SVC_API_URL: undefined,
  SVC_PROJECT_ID: undefined,
  NO_COLOR: "1",
} as const;

/** A sandboxed home for the CLI: its own SVC_HOME and config file, nothing inherited from the developer. */
export function cliHome(): { dir: string; env: CliEnv } {
  const dir = mkdtempSync(join(tmpdir(), "svc-cli-"));
  return {
    dir,
    env: {
      SVC_HOME: join(dir, "svc-home"),
      SVC_CONFIG_FILE: join(dir, "config", "config.json"),
      // An uninstall in this home removes shims from here only, never the machine's own.
      SVC_BIN_DIR: join(dir, "bin"),
      ...WITHOUT_SESSION,
    },
  };
}

/** Runs the real `svc` binary as a user would; never throws on a non-zero exit. */
export async function svc(args: string[], options: { env?: CliEnv; cwd?: string; input?: string } = {}) {
  return runBuffered(process.execPath, [BIN, ...args], { ...options, timeoutMs: 120_000 });
}

/**
 * A stand-in for the user's browser (`$BROWSER`) that records each URL it is asked to open, a line each. `opened(n)`
 * waits for the n-th whole line: the file exists, empty, a moment before the shell writes it.
 */
export function recordingBrowser(dir: string, name = "browser") {
  const recorded = join(dir, `${name}-urls.txt`);
  const path = join(dir, `${name}.sh`);
  writeFileSync(path, `#!/bin/sh\nprintf '%s\\n' "$1" >> '${recorded}'\n`);
  chmodSync(path, 0o755);
  const urls = () => (existsSync(recorded) ? readFileSync(recorded, "utf8").split("\n").slice(0, -1) : []);
  return {
    path,
    urls,
    async opened(n = 1, timeoutMs = 15_000): Promise<string> {
      const deadline = Date.now() + timeoutMs;
      while (urls().length < n) {
        if (Date.now() > deadline) throw new Error(`$BROWSER was not asked to open URL ${n} within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return urls()[n - 1]!;
    },
  };
}

/** This machine's address as other machines see it (eth0's, say): not loopback, not a Docker bridge. */
export function machineAddress(): string {
  for (const [name, addresses] of Object.entries(networkInterfaces())) {
    if (/^(lo|docker|br-|veth)/.test(name)) continue;
    const v4 = addresses?.find((a) => a.family === "IPv4" && !a.internal);
    if (v4) return v4.address;
  }
  throw new Error("this machine has no non-loopback IPv4 address to test listening with");
}

/** Runs the real `svc` binary under a pseudo-terminal (util-linux `script`), as a person at a terminal would. */
export async function svcTty(args: string[], options: { env?: CliEnv } = {}) {
  const command = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const result = await execa("script", ["-qfec", command, "/dev/null"], {
    env: options.env,
    extendEnv: true,
    reject: false,
    timeout: 60_000,
  });
  return { code: result.exitCode ?? -1, output: result.stdout };
}

/** A new git repository at `dir` with one commit on main: a user's app before svc. */
export async function newGitApp(dir: string): Promise<void> {
  mkdirSync(dir);
  await runBuffered("bash", ["-c", "git init -q -b main && echo hi > README.md && git add -A && git commit -qm init"], {
    cwd: dir,
    env: GIT_ENV,
    check: true,
  });
}

/** A user's first steps in a new app: `svc init`, commit, `svc ship` (through `run`); returns the project's id. */
export async function shipNewApp(
  dir: string,
  run: (args: string[]) => Promise<{ code: number; stderr: string }>,
): Promise<string> {
  await newGitApp(dir);
  const init = await run(["init"]);
  if (init.code !== 0) throw new Error(`svc init failed: ${init.stderr}`);
  await runBuffered("bash", ["-c", "git add -A && git commit -qm scaffold"], { cwd: dir, env: GIT_ENV, check: true });
  const ship = await run(["ship"]);
  if (ship.code !== 0) throw new Error(`svc ship failed: ${ship.stderr}`);
  return JSON.parse(readFileSync(join(dir, ".svc", "link.json"), "utf8")).project_id;
}
