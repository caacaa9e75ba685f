import { spawn } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { constants } from "node:os";
import { Readable, type Writable } from "node:stream";
import type { DaemonExecSpec } from "../protocol/daemon-exec.ts";
import { type SessionEnv, sessionEnvFile, withSessionEnv } from "./session-env-plugin.ts";
import { terminalCommand, terminalControl } from "./terminal.ts";

export type ExecDeps = {
  workspace: string;
  /** Where the session's environment file is (session-env-plugin.ts). */
  agentHome: string;
  /** The daemon's own environment: the sandbox's, as its container was created. */
  env: NodeJS.ProcessEnv;
};

/** A command the daemon runs for the API (exec-socket.ts). */
export type Command = {
  /** Null when the spec attached none. */
  stdin: Writable | null;
  stdout: Readable;
  stderr: Readable;
  resize(cols: number, rows: number): Promise<void>;
  /** The person left: the command is told as a closed terminal tells it. */
  hangUp(): void;
  /** Once it ended and its output is all read: its exit code, and why when it could not start at all. */
  done: Promise<{ code: number; failure?: string }>;
};

/**
 * The session's variables as the agent's shells get them: the file the daemon writes on a claim and on every
 * secret change. Unreadable or absent: none (a sandbox not claimed, whose container holds its whole environment).
 */
function sessionEnv(agentHome: string): SessionEnv {
  try {
    return JSON.parse(readFileSync(sessionEnvFile(agentHome), "utf8")) as SessionEnv;
  } catch {
    return {};
  }
}

/** What the engine's exec gives too: the container's environment, the session's over it, the spec's over both. */
function environment(spec: DaemonExecSpec, deps: ExecDeps): Record<string, string> {
  const env = withSessionEnv(deps.env as Record<string, string>, sessionEnv(deps.agentHome));
  for (const entry of spec.env) {
    const at = entry.indexOf("=");
    env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/** A command that did not start, as a shell would say it (127: not found, 126: cannot run). */
function startFailure(err: NodeJS.ErrnoException, spec: DaemonExecSpec): { code: number; failure: string } {
  const name = spec.tty ? "script" : spec.cmd[0]!;
  if (err.code === "ENOENT") {
    return spec.tty
      ? { code: 127, failure: "a terminal needs util-linux's script, which this sandbox does not have" }
      : { code: 127, failure: `${name}: command not found` };
  }
  return { code: 126, failure: `${name}: ${err.code === "EACCES" ? "permission denied" : err.message}` };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** A command that never ran: no output, its code and why at once. */
function notStarted(result: { code: number; failure: string }): Command {
  return {
    stdin: null,
    stdout: Readable.from([]),
    stderr: Readable.from([]),
    resize: async () => {},
    hangUp() {},
    done: Promise.resolve(result),
  };
}

/**
 * Runs the spec's command as the daemon's user (the sandbox's), in the workspace. In a process group of its own,
 * so that hanging up reaches what it started too; a terminal is util-linux script's (terminal.ts).
 */
export function startCommand(spec: DaemonExecSpec, deps: ExecDeps): Command {
  const cwd = spec.workingDir ?? deps.workspace;
  const env = environment(spec, deps);
  const terminal = spec.tty
    ? terminalCommand(spec.cmd, { cols: spec.cols, rows: spec.rows, shell: env.SHELL })
    : undefined;
  // A missing directory fails spawn with ENOENT as a missing command does: checked first, to say which.
  if (!isDirectory(cwd)) return notStarted({ code: 126, failure: `the working directory ${cwd} does not exist` });
  const argv = terminal?.argv ?? spec.cmd;
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd,
    env: { ...env, ...terminal?.env },
    // A terminal's stdin stays open even when none is attached: script would send its end to the command at once.
    stdio: [spec.stdin || spec.tty ? "pipe" : "ignore", "pipe", "pipe"],
    detached: true,
  });
  let spawnError: NodeJS.ErrnoException | undefined;
  child.on("error", (err) => {
    spawnError = err;
  });
  child.stdin?.on("error", () => {});
  const control = spec.tty && child.pid ? terminalControl(child.pid) : undefined;

  const done = new Promise<{ code: number; failure?: string }>((resolve) => {
    child.on("close", (code, signal) => {
      if (spawnError) return resolve(startFailure(spawnError, spec));
      if (code !== null) return resolve({ code });
      resolve({ code: 128 + (signal ? (constants.signals[signal] ?? 0) : 0) });
    });
  });

  return {
    stdin: spec.stdin ? child.stdin : null,
    stdout: child.stdout!,
    stderr: child.stderr!,
    resize: (cols, rows) => control?.resize(cols, rows) ?? Promise.resolve(),
    hangUp() {
      child.stdin?.destroy();
      if (control) return void control.hangUp();
      try {
        if (child.pid && child.exitCode === null) process.kill(-child.pid, "SIGHUP");
      } catch {}
    },
    done,
  };
}
