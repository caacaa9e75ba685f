import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { spawnBuffered } from "../../orchestrator/process-spawner.ts";

/** A fixed identity and no user or system config: every test's git behaves the same. */
export const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_TERMINAL_PROMPT: "0",
  GIT_AUTHOR_NAME: "Dev",
  GIT_AUTHOR_EMAIL: "dev@example.test",
  GIT_COMMITTER_NAME: "Dev",
  GIT_COMMITTER_EMAIL: "dev@example.test",
};

/** A clone URL carrying a token as the basic-auth password, as a plain git client would be configured. */
export function authedUrl(cloneUrl: string, secret: string, username = "x"): string {
  const url = new URL(cloneUrl);
  url.username = username;
  url.password = secret;
  return url.toString();
}

/**
 * A command run to its end from the process spawner (orchestrator/process-spawner.ts: a test process holds hundreds
 * of MB, and each fork of it costs tens of ms of a core), its output without the final newline, as execa gives it.
 * `check`: a non-zero exit throws, naming the command and its stderr.
 */
export async function runBuffered(
  file: string,
  args: string[],
  options: {
    cwd?: string;
    env?: Record<string, string | undefined>;
    input?: string;
    timeoutMs?: number;
    check?: boolean;
  } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { check, ...request } = options;
  const r = await spawnBuffered({ file, args, ...request });
  const strip = (text: string) => text.replace(/\r?\n$/, "");
  const result = { code: r.exitCode ?? -1, stdout: strip(r.stdout), stderr: strip(r.stderr || (r.failure ?? "")) };
  if (check && result.code !== 0)
    throw new Error(`${file} ${args.join(" ")} failed (${result.code}): ${result.stderr}`);
  return result;
}

export type WorkRepo = Awaited<ReturnType<typeof workRepo>>;

/** A developer's working copy: write files, commit on branches, push to the project's remote. */
export async function workRepo(remote: string, options: { defaultBranch?: string } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "svc-work-"));
  const run = async (args: string[], opts: { reject?: boolean } = {}) => {
    return runBuffered("git", args, { cwd: dir, env: GIT_ENV, check: opts.reject ?? true });
  };
  await run(["init", "-q", "-b", options.defaultBranch ?? "main"]);
  await run(["remote", "add", "origin", remote]);
  return {
    dir,
    git: run,
    write(files: Record<string, string | Buffer | null>) {
      for (const [path, content] of Object.entries(files)) {
        const full = join(dir, path);
        if (content === null) rmSync(full, { force: true });
        else {
          mkdirSync(dirname(full), { recursive: true });
          writeFileSync(full, content);
        }
      }
    },
    /** Writes the files, stages everything and commits; returns the new commit's SHA. */
    async commit(message: string, files: Record<string, string | Buffer | null> = {}) {
      this.write(files);
      await run(["add", "-A"]);
      await run(["commit", "-q", "--allow-empty", "-m", message]);
      return (await run(["rev-parse", "HEAD"])).stdout.trim();
    },
    async checkout(branch: string, options: { create?: boolean; from?: string; orphan?: boolean } = {}) {
      if (options.orphan) await run(["checkout", "-q", "--orphan", branch]);
      else if (options.create) await run(["checkout", "-q", "-b", branch, ...(options.from ? [options.from] : [])]);
      else await run(["checkout", "-q", branch]);
    },
    /** A push that may be refused: its exit code and git's words. */
    push(...refspecs: string[]) {
      return run(["push", "-q", "origin", ...refspecs], { reject: false });
    },
    /** A push that must land: a refusal throws with git's words, so a failed test says why. */
    async pushed(...refspecs: string[]) {
      await run(["push", "-q", "origin", ...refspecs]);
    },
    async sha(ref: string) {
      return (await run(["rev-parse", ref])).stdout.trim();
    },
  };
}
