import { basename } from "node:path";
import { Command } from "commander";
import { execa } from "execa";
import { Project } from "../../protocol/project.ts";
import { ApiRequestError } from "../api-client.ts";
import { type Context, optionsOf, resolveContext } from "../context.ts";
import { CliError } from "../errors.ts";
import { findLink, writeLink } from "../link-file.ts";
import { info, printJson, printLine } from "../output.ts";
import { setUpGitCredential } from "./git-credential.ts";

async function git(cwd: string, args: string[], env: Record<string, string> = {}) {
  const r = await execa("git", args, { cwd, reject: false, env: { GIT_TERMINAL_PROMPT: "0", ...env } });
  return { code: r.exitCode ?? -1, stdout: String(r.stdout).trim(), stderr: String(r.stderr).trim() };
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

/** `svc ship`: provision a managed project on first run, then push local commits there (a git push, not a deploy). */
export function shipCommand(): Command {
  return new Command("ship")
    .alias("deploy")
    .description("push local commits to the project's repository, creating the project on first run")
    .option("--json", "output JSON: project, branch, pushed commit")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<{ json?: boolean }>(cmd);
      const top = await git(process.cwd(), ["rev-parse", "--show-toplevel"]);
      if (top.code !== 0) throw new CliError("not a git repository: run 'git init' and commit first");
      const root = top.stdout;
      const head = await git(root, ["symbolic-ref", "--short", "-q", "HEAD"]);
      if (head.code !== 0) throw new CliError("HEAD is detached: check out a branch to ship");
      if ((await git(root, ["rev-parse", "--verify", "-q", "HEAD"])).code !== 0)
        throw new CliError("nothing to ship: commit first");
      const branch = head.stdout;

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
      if ((await git(root, ["remote", "get-url", "svc"])).code !== 0)
        await git(root, ["remote", "add", "svc", project.repo_url!]);
      await setUpGitCredential(root, new URL(project.repo_url!).origin);
      // The token travels in the environment (not argv, not .git/config) as an HTTP header for this push only.
      const pushed = await git(root, ["push", "--porcelain", project.repo_url!, `HEAD:refs/heads/${branch}`], {
        GIT_CONFIG_COUNT: "1",
        GIT_CONFIG_KEY_0: "http.extraHeader",
        GIT_CONFIG_VALUE_0: `Authorization: Bearer ${ctx.token}`,
      });
      if (pushed.code !== 0) throw new CliError(`push failed:\n${pushed.stderr || pushed.stdout}`);
      if (opts.json) {
        const commit = (await git(root, ["rev-parse", "HEAD"])).stdout;
        return printJson({ project_id: project.id, slug: project.slug, branch, commit, created, remote: "svc" });
      }
      info(`✓ shipped ${branch} to ${project.slug}`);
      printLine(project.id);
    });
}
