import type { Command } from "commander";
import { CrComment, CrCommentList, CreateCrCommentBody } from "../../protocol/cr-comment.ts";
import { crLabel, parseCrRef } from "../cr-ref.ts";
import { usageError } from "../errors.ts";
import { parsePositiveInt } from "../flag-parsers.ts";
import { info, printJson, printLine } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { printTable } from "../table.ts";

/** The flag or argument a body field comes from, for a usage error that names it. */
const FLAG_OF: Record<string, string> = { body: "<text>", path: "--file", line: "--line" };

/** The command line as the API's own body schema reads it: a bad one is a usage error (exit 2) naming the flag. */
function commentBody(text: string, opts: { file?: string; line?: number; toAgent?: boolean }) {
  const parsed = CreateCrCommentBody.safeParse({
    body: text,
    path: opts.file,
    line: opts.line,
    to_agent: opts.toAgent || undefined,
  });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const flag = FLAG_OF[String(issue.path[0])] ?? "the comment";
  throw usageError(`${flag}: ${issue.message}`);
}

/** Where the agent's part stands, in a few words. */
function agentPart(c: CrComment): string {
  if (!c.to_agent) return "-";
  const session = c.session_id ? `session ${c.session_id.slice(0, 8)}` : "session removed";
  return `${session} (${c.delivery}${c.delivery_error ? `: ${c.delivery_error}` : ""})`;
}

const wherePart = (c: CrComment) => (c.path ? `${c.path}${c.line ? `:${c.line}` : ""}` : "-");

/** `svc cr comment`, `svc cr comments` and `svc cr resolve`: the review loop, added to `svc cr`. */
export function reviewCommands(cr: Command): void {
  cr.command("comment")
    .description("comment on a change request, on a line of its diff, or send the comment to its agent")
    .argument("<cr>", "number (3 or #3) or id")
    .argument("<text>", "the comment")
    .option("--file <path>", "a file of the CR's diff the comment is about")
    .option("--line <n>", "a line of that file as the diff shows it (new side); needs --file", parsePositiveInt)
    .option("--to-agent", "send it to the CR's agent, which pushes its changes to the same CR")
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (ref: string, text: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand<{ file?: string; line?: number; toAgent?: boolean }>(
        cmd,
        "change-requests",
      );
      const body = commentBody(text, opts);
      const comment = await ctx.client.request("POST", path(`/${id}/comments`), CrComment, { body });
      if (opts.json) return printJson(comment);
      const where = comment.path ? ` on ${wherePart(comment)}` : "";
      info(`✓ commented on CR ${crLabel(id)}${where}`);
      if (comment.session_id) info(`sent to the agent of session ${comment.session_id}`);
      printLine(comment.id);
    });

  cr.command("comments")
    .description("a change request's comments, oldest first")
    .argument("<cr>", "number (3 or #3) or id")
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand(cmd, "change-requests");
      const comments = await ctx.client.request("GET", path(`/${id}/comments`), CrCommentList);
      if (opts.json) return printJson(comments);
      if (comments.length === 0) return info(`no comments on CR ${crLabel(id)}`);
      printTable(
        comments.map((c) => [
          c.created_at.slice(0, 16).replace("T", " "),
          c.author,
          wherePart(c),
          agentPart(c),
          c.body.replace(/\s+/g, " "),
        ]),
        { header: ["WHEN", "AUTHOR", "WHERE", "AGENT", "COMMENT"] },
      );
    });

  cr.command("resolve")
    .description("ask the change request's agent to merge its base, resolve the conflicts and push")
    .argument("<cr>", "number (3 or #3) or id")
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand(cmd, "change-requests");
      const request = await ctx.client.request("POST", path(`/${id}/resolve`), CrComment);
      if (opts.json) return printJson(request);
      info(`✓ ${request.body}`);
      info(
        `the agent of session ${request.session_id} is on it: its push updates CR ${crLabel(id)} (svc cr show ${id})`,
      );
      printLine(request.session_id ?? "");
    });
}
