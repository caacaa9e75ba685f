import type { Command } from "commander";
import { Session } from "../protocol/session.ts";
import { type Context, type GlobalOptions, optionsOf, resolveContext } from "./context.ts";
import { info } from "./output.ts";
import { findProject } from "./project-command.ts";

type SessionOptions = GlobalOptions & { json?: boolean };

/** The project a session belongs to: the one --project, SVC_PROJECT_ID or the link names, else the API's answer. */
export async function sessionProject(ctx: Context, opts: GlobalOptions, sessionId: string): Promise<string> {
  const named = findProject(opts);
  if (named) return named;
  const session = await ctx.client.request("GET", `/sessions/${encodeURIComponent(sessionId)}`, Session);
  if (ctx.verbose) info(`project: ${session.project_id} (from session ${sessionId})`);
  return session.project_id;
}

/**
 * What an action on one session (`svc sessions <verb> <id>`) starts from: its options, the API context and the
 * session's path (`/projects/{project}/sessions/{id}` plus a suffix). A session id alone is enough: outside a
 * linked directory its project comes from the API.
 */
export async function sessionCommand<T = object>(
  cmd: Command,
  sessionId: string,
  options: { quiet?: boolean } = {},
): Promise<{ opts: T & SessionOptions; ctx: Context; project: string; path: (suffix?: string) => string }> {
  const opts = optionsOf<T & SessionOptions>(cmd);
  const ctx = resolveContext(opts, options);
  const project = await sessionProject(ctx, opts, sessionId);
  const base = `/projects/${encodeURIComponent(project)}/sessions/${encodeURIComponent(sessionId)}`;
  return { opts, ctx, project, path: (suffix = "") => `${base}${suffix}` };
}
