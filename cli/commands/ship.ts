import { basename } from "node:path";
import { Command } from "commander";
import { execa } from "execa";
import { ChangeRequest, ChangeRequestList } from "../../protocol/change-request.ts";
import { MANIFEST_FILE } from "../../protocol/manifest.ts";
import { parseManifest } from "../../protocol/manifest-parse.ts";
import { Project } from "../../protocol/project.ts";
import { ApiRequestError } from "../api-client.ts";
import { type Context, optionsOf, resolveContext } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { findLink, writeLink } from "../link-file.ts";
import { info, printJson, printLine } from "../output.ts";
import { setUpGitCredential } from "./git-credential.ts";

type ShipOptions = { json?: boolean; merge?: boolean };

/** A CR description stays far below the API's limit however long the history being shipped. */
const MAX_LISTED_COMMITS = 50;

export async function git(cwd: string, args: string[], env: Record<string, string> = {}) {
  const r = await execa("git", args, { cwd, reject: false, env: { GIT_TERMINAL_PROMPT: "0", ...env } });
  return { code: r.exitCode ?? -1, stdout: String(r.stdout).trim(), stderr: String(r.stderr).trim() };
}

/** The token travels in the environment (not argv, not .git/config) as an HTTP header for one git command. */
export function bearer(token: string): Record<string, string> {
  return {
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: `Authorization: Bearer ${token}`,
  };
}

async function pushHead(ctx: Context, root: string, url: string, branch: string): Promise<void> {
  const pushed = await git(root, ["push", "--porcelain", url, `HEAD:refs/heads/${branch}`], bearer(ctx.token));
  if (pushed.code !== 0) throw new CliError(`push failed:\n${pushed.stderr || pushed.stdout}`);
}

/** The tip of `branch` in the project's repository, its commits fetched here; undefined while it does not exist. */
async function fetchTip(ctx: Context, root: string, url: string, branch: string): Promise<string | undefined> {
  const ref = `refs/heads/${branch}`;
  const listed = await git(root, ["ls-remote", url, ref], bearer(ctx.token));
  if (listed.code !== 0) throw new CliError(`cannot read ${url}:\n${listed.stderr || listed.stdout}`);
  const tip = listed.stdout
    .split("\n")
    .map((line) => line.split("\t"))
    .find(([, name]) => name === ref)?.[0];
  if (!tip) return undefined;
  const fetched = await git(root, ["fetch", "--quiet", "--no-tags", url, ref], bearer(ctx.token));
  if (fetched.code !== 0) throw new CliError(`fetch failed:\n${fetched.stderr || fetched.stdout}`);
  return tip;
}

/** One branch per shipped commit: shipping the same commit again finds its CR instead of opening another. */
const shipBranch = (commit: string) => `ship/${commit.slice(0, 12)}`;

/** Title: the newest commit's subject (and how many more come with it); description: every subject, oldest first. */
async function describeCommits(root: string, tip: string, commit: string) {
  const log = await git(root, ["log", "--reverse", "--format=%s", `${tip}..${commit}`]);
  const subjects = log.stdout.split("\n").filter(Boolean);
  const newest = subjects.at(-1) ?? `ship ${commit.slice(0, 12)}`;
  const more = subjects.length - 1;
  const title = more > 0 ? `${newest} (and ${more} more commit${more === 1 ? "" : "s"})` : newest;
  const listed = subjects.slice(0, MAX_LISTED_COMMITS).map((s) => `- ${s}`);
  if (subjects.length > MAX_LISTED_COMMITS) listed.push(`- … and ${subjects.length - MAX_LISTED_COMMITS} more`);
  return { title, description: listed.join("\n") };
}

/** The open CR that already brings `body.head_ref` into `body.base_ref`, else a new one. */
async function openCr(
  ctx: Context,
  crs: string,
  body: { title: string; description: string; head_ref: string; base_ref: string },
): Promise<ChangeRequest> {
  const { change_requests } = await ctx.client.request("GET", crs, ChangeRequestList, { query: { status: "open" } });
  const open = change_requests.find((c) => c.head_ref === body.head_ref && c.base_ref === body.base_ref);
  if (open) {
    info(`✓ CR #${open.number} is already open: ${open.title} (${open.head_ref} -> ${open.base_ref})`);
    return open;
  }
  const created = await ctx.client.request("POST", crs, ChangeRequest, { body });
  info(`✓ opened CR #${created.number}: ${created.title} (${created.head_ref} -> ${created.base_ref})`);
  return created;
}

/** `--merge`: merges exactly the pushed commit; a refusal (conflicts, a project token) leaves the CR open. */
async function mergeNow(ctx: Context, crs: string, cr: ChangeRequest, commit: string): Promise<ChangeRequest> {
  let merged: ChangeRequest;
  try {
    merged = await ctx.client.request("POST", `${crs}/${cr.cr_id}/merge`, ChangeRequest, {
      body: { head_sha: commit },
    });
  } catch (err) {
    if (err instanceof ApiRequestError) throw new CliError(`CR #${cr.number} stays open, not merged: ${err.message}`);
    throw err;
  }
  const how =
    merged.merge_commit_sha === commit
      ? "fast-forward"
      : `merge commit ${merged.merge_commit_sha?.slice(0, 12)}; 'git pull svc ${merged.base_ref}' brings it here`;
  info(`✓ merged CR #${merged.number} into ${merged.base_ref} (${how})`);
  return merged;
}

/**
 * New commits on the default branch never move it directly (the server refuses that push): they go to their own
 * branch and a CR, which `--merge` merges at once.
 */
async function shipForReview(
  ctx: Context,
  root: string,
  project: Project,
  commit: string,
  tip: string,
  opts: ShipOptions,
): Promise<void> {
  const base = project.default_branch;
  const result = { project_id: project.id, slug: project.slug, commit, created: false, remote: "svc" };
  if ((await git(root, ["merge-base", "--is-ancestor", commit, tip])).code === 0) {
    info(`nothing to ship: ${commit.slice(0, 12)} is already on ${base} of ${project.slug}`);
    if (opts.json) printJson({ ...result, branch: base, change_request: null });
    return;
  }
  const branch = shipBranch(commit);
  await pushHead(ctx, root, project.repo_url!, branch);
  const crs = `/projects/${project.id}/change-requests`;
  const commits = await describeCommits(root, tip, commit);
  let cr = await openCr(ctx, crs, { ...commits, head_ref: branch, base_ref: base });
  if (opts.merge) cr = await mergeNow(ctx, crs, cr, commit);
  else info(`  merge it with 'svc cr merge ${cr.number}' (or 'svc ship --merge')`);
  if (opts.json) return printJson({ ...result, branch, change_request: cr });
  printLine(`#${cr.number}`);
}

/**
 * The manifest being shipped (`svc.toml` in the commit, not the working copy), checked with the API's own parser
 * and schema before anything is created or pushed: a mistake is named with its key and line here, not discovered
 * later on the default branch. No manifest is fine.
 */
async function checkManifest(root: string): Promise<void> {
  const shown = await execa("git", ["show", `HEAD:${MANIFEST_FILE}`], {
    cwd: root,
    reject: false,
    stripFinalNewline: false,
  });
  if (shown.exitCode !== 0) return;
  const parsed = parseManifest(String(shown.stdout));
  if ("error" in parsed)
    throw new CliError(
      `nothing shipped: ${parsed.error.message}\n  fix ${MANIFEST_FILE}, commit, and run 'svc ship' again`,
    );
}

async function provision(ctx: Context, root: string, branch: string): Promise<Project> {
  const name = basename(root);
  for (let attempt = 0; attempt < 5; attempt++) {
    // A taken slug (another checkout called the same) gets a short random suffix.
    const slug =
      attempt === 0
        ? undefined
        : `${
            name
              .toLowerCase()
              .replace(/[^a-z0-9]+/g, "-")
              .replace(/^-|-$/g, "")
              .slice(0, 50) || "project"
          }-${Math.random().toString(16).slice(2, 6)}`;
    try {
      return await ctx.client.request("POST", "/projects", Project, { body: { name, slug, default_branch: branch } });
    } catch (err) {
      if (!(err instanceof ApiRequestError) || err.code !== "SLUG_TAKEN") throw err;
    }
  }
  throw new CliError("could not find a free project slug; create the project with 'svc projects create'");
}

/**
 * `svc ship`: provision a managed project on first run and push the branch that creates its default branch; later,
 * push other branches as they are, and new commits on the default branch through a CR (a git push, not a deploy).
 */
export function shipCommand(): Command {
  return new Command("ship")
    .alias("deploy")
    .description(
      "push local commits to the project's repository, creating the project on first run; " +
        "new commits on the default branch go to a new branch and a change request",
    )
    .option("--merge", "merge the change request at once (when it is clean)")
    .option("--json", "output JSON: project, branch, pushed commit, change request")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<ShipOptions>(cmd);
      const top = await git(process.cwd(), ["rev-parse", "--show-toplevel"]);
      if (top.code !== 0) throw new CliError("not a git repository: run 'git init' and commit first");
      const root = top.stdout;
      const head = await git(root, ["symbolic-ref", "--short", "-q", "HEAD"]);
      if (head.code !== 0) throw new CliError("HEAD is detached: check out a branch to ship");
      const commit = await git(root, ["rev-parse", "--verify", "-q", "HEAD"]);
      if (commit.code !== 0) throw new CliError("nothing to ship: commit first");
      const branch = head.stdout;
      await checkManifest(root);

      const ctx = resolveContext(opts);
      const linked = findLink(root);
      let project: Project;
      const created = !linked;
      if (linked) {
        project = await ctx.client.request("GET", `/projects/${linked.link.project_id}`, Project);
      } else {
        project = await provision(ctx, root, branch);
        writeLink(root, {
          project_id: project.id,
          account_id: project.account_id,
          host: ctx.hostName,
          host_url: ctx.hostUrl,
        });
        info(`✓ created project ${project.slug} with a managed repository; linked ${root}`);
      }
      if (project.repo_kind !== "managed") {
        throw new CliError(
          `project ${project.slug} uses an external repository (${project.repo_url}); push there instead`,
        );
      }
      const onDefault = branch === project.default_branch;
      if (opts.merge && !onDefault)
        throw usageError(
          `--merge is for the default branch (${project.default_branch}); ${branch} is pushed without a CR`,
        );
      if ((await git(root, ["remote", "get-url", "svc"])).code !== 0)
        await git(root, ["remote", "add", "svc", project.repo_url!]);
      await setUpGitCredential(root, new URL(project.repo_url!).origin);
      // Only the push that creates the default branch may write it; after that it moves by CR merges alone.
      const tip = onDefault && !created ? await fetchTip(ctx, root, project.repo_url!, branch) : undefined;
      if (tip) return shipForReview(ctx, root, project, commit.stdout, tip, opts);
      await pushHead(ctx, root, project.repo_url!, branch);
      if (opts.json) {
        return printJson({
          project_id: project.id,
          slug: project.slug,
          branch,
          commit: commit.stdout,
          created,
          remote: "svc",
        });
      }
      info(`✓ shipped ${branch} to ${project.slug}`);
      printLine(project.id);
    });
}
