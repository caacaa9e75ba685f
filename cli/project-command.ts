import type { Command } from "commander";
import { type Context, type GlobalOptions, optionsOf, resolveContext, resolveProject } from "./context.ts";

type ProjectOptions = GlobalOptions & { json?: boolean };

/**
 * What an action on one of a project's collections (`/projects/{id}/<collection>`) starts from: its options, the
 * API context and the collection's path. One helper, so that `cr`, `sessions` and `secrets` resolve the host, the
 * token and the project in the same order and say so the same way.
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
