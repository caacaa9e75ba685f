import { Command } from "commander";
import { Project, ProjectList } from "../../protocol/project.ts";
import { readCliEnv } from "../config.ts";
import { type Context, optionsOf, resolveContext } from "../context.ts";
import { openDashboard } from "../dashboard-link.ts";
import { CliError } from "../errors.ts";
import { findLink, removeLink, writeLink } from "../link-file.ts";
import { info, printJson, printLine } from "../output.ts";
import { notInteractive, pick } from "../picker.ts";
import { findProject, resolveProject } from "../project-command.ts";
import { interactive } from "../prompt.ts";
import { printTable } from "../table.ts";

type Opts = { json?: boolean };

export function dashboardUrl(hostUrl: string): string {
  return (readCliEnv().dashboardUrl ?? hostUrl).replace(/\/+$/, "");
}

const NO_PROJECTS = "no projects yet: 'svc ship' in a repository, or 'svc projects create'";

/** `svc projects link` without an id: the account's projects as a list, the directory's current link the default. */
async function pickProject(ctx: Context): Promise<Project> {
  const { projects: list } = await ctx.client.request("GET", "/projects", ProjectList);
  if (list.length === 0) throw new CliError(NO_PROJECTS);
  const linked = findLink()?.link.project_id;
  const current = list.findIndex((p) => p.id === linked);
  const choices = list.map((p) => ({ key: p.slug, detail: `${p.name}  ${p.id}`, value: p }));
  return pick("Which project?", choices, current >= 0 ? current : undefined);
}

export function projectsCommand(): Command {
  const projects = new Command("projects").description("projects on the active account");

  projects
    .command("ls")
    .description("every project you can reach")
    .option("--json", "output JSON")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<Opts>(cmd);
      const { projects: list } = await resolveContext(opts).client.request("GET", "/projects", ProjectList);
      if (opts.json) return printJson(list);
      if (list.length === 0) return info(NO_PROJECTS);
      printTable(
        list.map((p) => [p.id, p.slug, p.repo_kind, p.default_branch, p.repo_url ?? ""]),
        { header: ["ID", "SLUG", "REPO", "BRANCH", "URL"] },
      );
    });

  projects
    .command("info")
    .description("one project (default: the linked one)")
    .argument("[id-or-slug]")
    .option("--json", "output JSON")
    .action(async (ref: string | undefined, _o, cmd: Command) => {
      const opts = optionsOf<Opts>(cmd);
      const ctx = resolveContext(opts);
      const project = await ctx.client.request(
        "GET",
        `/projects/${encodeURIComponent(ref ?? resolveProject(opts))}`,
        Project,
      );
      if (opts.json) return printJson(project);
      printLine(
        [
          `${project.name} (${project.slug})`,
          `id:       ${project.id}`,
          `account:  ${project.account_id}`,
          `repo:     ${project.repo_kind} ${project.repo_url ?? ""}`,
          `branch:   ${project.default_branch}`,
          `created:  ${project.created_at}`,
        ].join("\n"),
      );
    });

  projects
    .command("create")
    .description(
      "register a project; with --repo, an external repository (https, http, ssh or git URL, or user@host:path)",
    )
    .argument("<name>")
    .option("--repo <url>", "external repository URL (https://, ssh://, git:// or user@host:path)")
    .option("--default-branch <branch>", "default branch (default main)")
    .option("--slug <slug>", "short name (default: from the name)")
    .option("--json", "output JSON")
    .action(async (name: string, _o, cmd: Command) => {
      const opts = optionsOf<Opts & { repo?: string; defaultBranch?: string; slug?: string }>(cmd);
      const project = await resolveContext(opts).client.request("POST", "/projects", Project, {
        body: { name, repo_url: opts.repo, default_branch: opts.defaultBranch, slug: opts.slug },
      });
      if (opts.json) return printJson(project);
      info(`✓ created project ${project.slug}`);
      printLine(project.id);
    });

  projects
    .command("link")
    .description("bind this directory to a project (.svc/link.json); no id: pick one from a list, at a terminal")
    .argument("[id]")
    .option("--json", "output JSON: the link written")
    .action(async (id: string | undefined, _o, cmd: Command) => {
      const opts = optionsOf<Opts>(cmd);
      // Said before anything else (the host line, a request): nothing is worth doing without the id.
      if (!id && !interactive())
        throw notInteractive("argument <id>", "svc projects link <id>; 'svc projects ls' lists them");
      const ctx = resolveContext(opts);
      const project = id
        ? await ctx.client.request("GET", `/projects/${encodeURIComponent(id)}`, Project)
        : await pickProject(ctx);
      const link = {
        project_id: project.id,
        account_id: project.account_id,
        host: ctx.hostName,
        host_url: ctx.hostUrl,
      };
      const path = writeLink(process.cwd(), link);
      if (opts.json) return printJson({ path, ...link });
      info(`✓ linked ${process.cwd()} to ${project.slug} (${path})`);
    });

  projects
    .command("unlink")
    .description("remove .svc/link.json")
    .option("--json", "output JSON")
    .action((opts: Opts) => {
      const removed = removeLink();
      if (opts.json) return printJson({ removed: removed ?? null });
      info(removed ? `✓ removed ${removed}` : "not linked");
    });

  projects
    .command("open")
    .description("sign a browser in to the dashboard: the project's page (default: the linked one, else all projects)")
    .argument("[id-or-slug]")
    .option("--json", "output JSON: {url}")
    .action(async (ref: string | undefined, _o, cmd: Command) => {
      const opts = optionsOf<Opts>(cmd);
      const ctx = resolveContext(opts, { quiet: true });
      const named = ref ?? findProject(opts);
      // An unknown project fails here, before any link is made or browser opened.
      const project = named
        ? await ctx.client.request("GET", `/projects/${encodeURIComponent(named)}`, Project)
        : undefined;
      await openDashboard(ctx, project ? `/dashboard/projects/${project.id}` : "/dashboard", opts);
    });

  return projects;
}
