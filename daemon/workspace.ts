import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse as parseToml } from "smol-toml";
import type { DaemonConfig } from "./config.ts";
import { fetchCloneCredential } from "./git-credential.ts";

const run = promisify(execFile);
const DEFAULT_CONFIG_DIR = ".svc/agent";

/** git in the sandbox, its output trimmed; it never prompts. */
export async function git(args: string[], cwd?: string, env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await run("git", args, {
    cwd,
    env: { ...process.env, GIT_TERMINAL_PROMPT: "0", ...env },
    maxBuffer: 64 << 20,
  });
  return stdout.trim();
}

/** How the workspace's repository pushes: through the credential helper only, to the branch it is on. */
function repositoryConfig(config: DaemonConfig, credentialHelper: string): string[] {
  return [
    `credential.helper=!${credentialHelper}`,
    // git then tells the helper the repository's path too: it answers for this repository only.
    "credential.useHttpPath=true",
    "push.default=current",
    `user.name=svc agent (${config.agentName})`,
    "user.email=agent@svc.local",
  ];
}

/**
 * Clones the session branch into the workspace and configures the repository so that `git push origin HEAD`
 * works with no token in the environment or in .git/config: only the credential helper, which asks the API.
 * Only what a session works on: its branch and its base (no other branch, no tags), and the trees of their
 * history without old file contents, which git fetches through the same helper when a command needs one
 * (`git log -p`, a checkout of an old commit). On a repository with history that is most of the bytes.
 */
export async function cloneWorkspace(config: DaemonConfig, credentialHelper: string): Promise<void> {
  mkdirSync(config.workspace, { recursive: true });
  const base = config.baseRef && config.baseRef !== config.branch ? config.baseRef : undefined;
  const cloned = existsSync(join(config.workspace, ".git"));
  // A retry after a failed fetch of the base finishes that fetch.
  if (cloned && (!base || (await hasRef(config.workspace, `refs/remotes/origin/${base}`)))) return;
  // The first credential is fetched here and handed to this one clone through the environment; later pushes
  // go through the helper the clone writes into the repository's config.
  const credential = await fetchCloneCredential(config.apiUrl, config.projectId, config.serviceKey);
  const basic = Buffer.from(`${credential.username}:${credential.password}`).toString("base64");
  const withCredential = {
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
  if (!cloned)
    await git(
      [
        "clone",
        "--quiet",
        "--filter=blob:none",
        "--single-branch",
        "--no-tags",
        "--branch",
        config.branch,
        ...repositoryConfig(config, credentialHelper).flatMap((c) => ["-c", c]),
        "--",
        config.repoUrl,
        config.workspace,
      ],
      undefined,
      withCredential,
    );
  if (!base) return;
  // The base too (what `git diff origin/<base>` and a CR compare against), fetched from now on with the branch.
  await git(["remote", "set-branches", "--add", "origin", base], config.workspace);
  await git(["fetch", "--quiet", "origin", base], config.workspace, withCredential);
}

async function hasRef(workspace: string, ref: string): Promise<boolean> {
  return git(["rev-parse", "--verify", "--quiet", ref], workspace).then(
    () => true,
    () => false,
  );
}

/**
 * A warm-pool sandbox's workspace, from a git bundle of the base branch the orchestrator sent: no credential
 * exists before a session claims the sandbox. It ends as a clone would: `origin` is the project's repository,
 * and the session branch (named before the claim) is checked out at the base.
 */
export async function seedWorkspace(config: DaemonConfig, bundle: string, credentialHelper: string): Promise<void> {
  mkdirSync(config.workspace, { recursive: true });
  await git([
    "clone",
    "--quiet",
    "--branch",
    config.baseRef,
    ...repositoryConfig(config, credentialHelper).flatMap((c) => ["-c", c]),
    "--",
    bundle,
    config.workspace,
  ]);
  await git(["remote", "set-url", "origin", config.repoUrl], config.workspace);
  await git(["checkout", "--quiet", "-b", config.branch], config.workspace);
}

/** Re-pulls the session branch (fast-forward only: local commits are never thrown away). */
export async function pullWorkspace(config: DaemonConfig): Promise<void> {
  await git(["fetch", "--quiet", "origin", config.branch], config.workspace);
  await git(["merge", "--ff-only", "--quiet", "FETCH_HEAD"], config.workspace);
}

/**
 * The workspace's HEAD commit, read from .git's files: health answers this on every poll, and a git process per
 * poll costs milliseconds. Anything unusual (a .git file, a missing ref) asks git itself.
 */
export async function headCommit(workspace: string): Promise<string | null> {
  try {
    const dir = join(workspace, ".git");
    const head = (await readFile(join(dir, "HEAD"), "utf8")).trim();
    if (/^[0-9a-f]{40,64}$/.test(head)) return head;
    const ref = /^ref: (refs\/[^\s]+)$/.exec(head)?.[1];
    if (ref) {
      const loose = await readFile(join(dir, ref), "utf8").catch(() => undefined);
      if (loose && /^[0-9a-f]{40,64}\s*$/.test(loose)) return loose.trim();
      const packed = await readFile(join(dir, "packed-refs"), "utf8").catch(() => "");
      const line = packed.split("\n").find((l) => l.endsWith(` ${ref}`));
      if (line) return line.split(" ")[0]!;
    }
  } catch {
    // fall through to git
  }
  try {
    return await git(["rev-parse", "HEAD"], workspace);
  } catch {
    return null;
  }
}

/** The agent config dir from svc.toml `[agent] config_dir`, resolved inside the workspace. */
export function agentConfigDir(workspace: string): string {
  try {
    const manifest = parseToml(readFileSync(join(workspace, "svc.toml"), "utf8")) as {
      agent?: { config_dir?: unknown };
    };
    const dir = manifest.agent?.config_dir;
    if (typeof dir === "string" && dir && !dir.startsWith("/") && !dir.split("/").includes(".."))
      return join(workspace, dir);
  } catch {}
  return join(workspace, DEFAULT_CONFIG_DIR);
}
