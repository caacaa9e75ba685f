import { spawnBuffered } from "../../orchestrator/process-spawner.ts";
import { redact as redactSecrets } from "../../protocol/redact.ts";

export type GitResult = { stdout: string; stderr: string; exitCode: number };

export type GitOptions = {
  /** The repository (bare or not); becomes `git -C <dir>`. */
  dir?: string;
  input?: string;
  env?: Record<string, string>;
  /** Exit codes that are answers rather than failures (e.g. 1 from merge-base or merge-tree). */
  okCodes?: number[];
  timeoutMs?: number;
  /** Values that must never appear in an error (credentials in `env` headers are found on their own). */
  secrets?: string[];
};

/** Credentials embedded in a URL (`scheme://user:secret@host`), and any of `secrets`, never reach a message or a log line. */
export function redact(text: string, secrets: string[] = []): string {
  return redactSecrets(text, secrets);
}

/**
 * The credentials a git invocation carries in its environment: `http.<url>.extraHeader` values given through
 * GIT_CONFIG_VALUE_<n> (api/git/repositories.ts), as the whole header, its token and its base64 user:password.
 */
export function credentialsIn(env: Record<string, string> = {}): string[] {
  const found: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    const header = /^GIT_CONFIG_VALUE_\d+$/.test(name) ? /^Authorization:\s*(\S+)\s+(\S+)$/i.exec(value) : null;
    if (!header) continue;
    const token = header[2]!;
    found.push(value, token);
    if (header[1]!.toLowerCase() === "basic") {
      const decoded = Buffer.from(token, "base64").toString("utf8");
      found.push(decoded, decoded.slice(decoded.indexOf(":") + 1));
    }
  }
  return found;
}

/** A failed git command; its message, arguments and stderr are redacted, as any of them may be logged. */
export class GitError extends Error {
  readonly args: string[];
  readonly stderr: string;
  constructor(
    args: string[],
    readonly exitCode: number,
    stderr: string,
    secrets: string[] = [],
  ) {
    const clean = redact(stderr, secrets);
    super(`git ${args[0]} failed (${exitCode}): ${clean.trim().split("\n").slice(-3).join(" | ")}`);
    this.args = args.map((arg) => redact(arg, secrets));
    this.stderr = clean;
  }
}

/** Git configuration passed through the environment (GIT_CONFIG_COUNT/KEY_n/VALUE_n): never argv, never a file. */
export function configEnv(config: [string, string][]): Record<string, string> {
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(config.length) };
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
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
  const result = await spawnBuffered({
    file: "git",
    args: options.dir ? ["-C", options.dir, ...args] : args,
    input: options.input,
    env: { ...BASE_ENV, ...options.env },
    timeoutMs: options.timeoutMs ?? 120_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  const exitCode = result.exitCode ?? -1;
  if (exitCode !== 0 && !(options.okCodes ?? []).includes(exitCode)) {
    const secrets = [...(options.secrets ?? []), ...credentialsIn(options.env)];
    throw new GitError(args, exitCode, result.stderr || (result.failure ?? ""), secrets);
  }
  return { stdout: result.stdout, stderr: result.stderr, exitCode };
}
