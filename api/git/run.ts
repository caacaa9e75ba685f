import { execa } from "execa";

export type GitResult = { stdout: string; stderr: string; exitCode: number };

export type GitOptions = {
  /** The repository (bare or not); becomes `git -C <dir>`. */
  dir?: string;
  input?: string;
  env?: Record<string, string>;
  /** Exit codes that are answers rather than failures (e.g. 1 from merge-base or merge-tree). */
  okCodes?: number[];
  timeoutMs?: number;
};

/** Credentials embedded in a URL (`scheme://user:secret@host`) never reach a message or a log line. */
export function redact(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, "$1***@");
}

export class GitError extends Error {
  constructor(
    readonly args: string[],
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(`git ${args[0]} failed (${exitCode}): ${redact(stderr).trim().split("\n").slice(-3).join(" | ")}`);
  }
}

// Never prompt, never read the host user's git config: every repository behaves the same for every caller.
export const BASE_ENV = {
  GIT_TERMINAL_PROMPT: "0",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  LC_ALL: "C",
};

/** The git binary, always: never a JS reimplementation. */
export async function git(args: string[], options: GitOptions = {}): Promise<GitResult> {
  const fullArgs = options.dir ? ["-C", options.dir, ...args] : args;
  const result = await execa("git", fullArgs, {
    input: options.input,
    env: { ...BASE_ENV, ...options.env },
    reject: false,
    stripFinalNewline: false,
    timeout: options.timeoutMs ?? 120_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  const exitCode = result.exitCode ?? -1;
  if (exitCode !== 0 && !(options.okCodes ?? []).includes(exitCode)) {
    throw new GitError(args, exitCode, String(result.stderr ?? result.message));
  }
  return { stdout: String(result.stdout), stderr: String(result.stderr), exitCode };
}
