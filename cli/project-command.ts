import { type Command, Option } from "commander";
import { type CliSettings, readCliEnv } from "./config.ts";
import { type Context, type GlobalOptions, optionsOf, resolveContext } from "./context.ts";
import { CliError } from "./errors.ts";
import { findLink } from "./link-file.ts";
import { info } from "./output.ts";

type ProjectOptions = GlobalOptions & { json?: boolean };

/** `--project`, as every command that acts on one project takes it. */
export const projectOption = () =>
  new Option("--project <id>", "project id or slug (default: SVC_PROJECT_ID or the linked project)");

/**
 * SPEC "Project resolution order": --project, SVC_PROJECT_ID (a sandbox's own included), .svc/link.json in cwd or
 * an ancestor; undefined when none. The one place a command's project is found.
 */
export function findProject(opts: GlobalOptions, env: CliSettings = readCliEnv()): string | undefined {
  const fromLink = () => findLink()?.link.project_id;
  const project = opts.project ?? env.projectId ?? fromLink();
  const source = opts.project ? "--project" : env.projectId ? "SVC_PROJECT_ID" : ".svc/link.json";
  if (project && opts.verbose) info(`project: ${project} (from ${source})`);
  return project;
}

/** The project as findProject finds it, or a failure saying how to name one. */
export function resolveProject(opts: GlobalOptions, env: CliSettings = readCliEnv()): string {
  const project = findProject(opts, env);
  if (!project) throw new CliError("no project: pass --project <id>, set SVC_PROJECT_ID, or run 'svc projects link'");
  return project;
}

/**
 * What an action on one of a project's collections (`/projects/{id}/<collection>`) starts from: its options, the
 * API context and the collection's path. One helper, so that every project command resolves the host, the token
 * and the project in the same order and says so the same way.
 */
export function projectCommand<T = object>(
  cmd: Command,
  collection: string,
): { opts: T & ProjectOptions; ctx: Context; path: (suffix?: string) => string } {
  const opts = optionsOf<T & ProjectOptions>(cmd);
  const ctx = resolveContext(opts);
  const project = encodeURIComponent(resolveProject(opts));
  return { opts, ctx, path: (suffix = "") => `/projects/${project}/${collection}${suffix}` };
}
