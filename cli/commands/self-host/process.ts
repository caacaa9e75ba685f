import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { packageRoot } from "../../../protocol/package-root.ts";
import { readCliEnv } from "../../config.ts";
import type { SelfHostPaths } from "./state.ts";

/** The API entry point: the bundle when built, the source through tsx otherwise. */
function apiCommand(root: string): string[] {
  const bundle = join(root, "dist", "api.mjs");
  if (!readCliEnv().fromSource && existsSync(bundle)) return [bundle];
  return ["--import", "tsx", join(root, "api", "main.ts")];
}

/** The caller's environment without what must not leak into the stack (its config comes from selfhost.json):
 * svc's own variables, a database URL, and compose's project settings. */
export function callerEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("SVC_") && !k.startsWith("COMPOSE_") && k !== "DATABASE_URL") env[k] = v;
  }
  return env;
}

export function readPid(paths: SelfHostPaths): number | undefined {
  try {
    const pid = Number(readFileSync(paths.pid, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** A process that exists and is not a zombie (a killed API can linger as one until its parent reaps it). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true;
  }
}

export function clearPid(paths: SelfHostPaths): void {
  rmSync(paths.pid, { force: true });
}

/** Starts the API detached from this process, logging to `logs/api.log`; returns its pid. */
export function spawnApi(paths: SelfHostPaths, env: Record<string, string>): number {
  mkdirSync(paths.logs, { recursive: true, mode: 0o700 });
  mkdirSync(dirname(paths.pid), { recursive: true, mode: 0o700 });
  const log = openSync(paths.apiLog, "a", 0o600);
  // Resolved here, not at import: the sandbox's standalone CLI has no package tree around it.
  const root = packageRoot();
  const child = spawn(process.execPath, apiCommand(root), {
    cwd: root,
    detached: true,
    stdio: ["ignore", log, log],
    env: { ...process.env, ...env },
  });
  closeSync(log);
  child.unref();
  if (!child.pid) throw new Error("could not start the API process");
  writeFileSync(paths.pid, `${child.pid}\n`, { mode: 0o600 });
  return child.pid;
}

export function tailFile(path: string, lines: number): string {
  try {
    const all = readFileSync(path, "utf8").split("\n");
    if (all.at(-1) === "") all.pop();
    return all.slice(-lines).join("\n");
  } catch {
    return "";
  }
}
