import { Command, Option } from "commander";
import {
  ChangeRequest,
  ChangeRequestEnvelope,
  ChangeRequestList,
  Diff,
  MergePreview,
} from "../../protocol/change-request.ts";
import { ApiRequestError } from "../api-client.ts";
import { readCliEnv } from "../config.ts";
import { type Context, type GlobalOptions, optionsOf } from "../context.ts";
import { parseCrRef } from "../cr-ref.ts";
import { CliError, usageError } from "../errors.ts";
import { parseCommitSha } from "../flag-parsers.ts";
import { findLink } from "../link-file.ts";
import { info, printJson, printLine, warn } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { printTable, useColor } from "../table.ts";
import { approvalCommands } from "./cr-approvals.ts";
import { checksCell, checksCommand, reviewLines, setAutoMerge } from "./cr-checks.ts";
import { reviewCommands } from "./cr-review.ts";

function describePreview(p: MergePreview): string {
  if (p.merge_base === null) return "cannot merge: unrelated histories";
  if (p.is_up_to_date) return "up to date: nothing to merge";
  if (!p.can_merge) return `conflicts:\n${p.conflicts.map((c) => `  ${c}`).join("\n")}`;
  return p.can_fast_forward ? "clean, fast-forward" : "clean, merge commit";
}

function printCr(cr: ChangeRequest, preview?: MergePreview): void {
  const lines = [
    `#${cr.number} ${cr.title}`,
    `status:   ${cr.status}`,
    `branches: ${cr.head_ref} -> ${cr.base_ref}`,
    `head:     ${cr.head_commit_sha ?? "-"}`,
    `base:     ${cr.base_commit_sha ?? "-"}`,
    `id:       ${cr.cr_id}`,
    `created:  ${cr.created_at}${cr.origin_session_id ? ` (session ${cr.origin_session_id})` : ""}`,
  ];
  if (cr.status === "merged") lines.push(`merged:   ${cr.merged_at} as ${cr.merge_commit_sha}`);
  if (cr.status === "closed") lines.push(`closed:   ${cr.closed_at}`);
  if (preview) lines.push(`preview:  ${describePreview(preview)}`);
  lines.push(...reviewLines(cr));
  if (cr.description) lines.push("", cr.description);
  printLine(lines.join("\n"));
}

function colorPatch(patch: string): string {
  return patch
    .split("\n")
    .map((line) => {
      if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index "))
        return `\x1b[1m${line}\x1b[0m`;
      if (line.startsWith("+")) return `\x1b[32m${line}\x1b[0m`;
      if (line.startsWith("-")) return `\x1b[31m${line}\x1b[0m`;
      if (line.startsWith("@@")) return `\x1b[36m${line}\x1b[0m`;
      return line;
    })
    .join("\n");
}

async function get(ctx: Context, path: string) {
  return (await ctx.client.request("GET", path, ChangeRequestEnvelope)).change_request;
}

/** Why `--head` could not be taken from the checkout: a usage error (exit 2) that names the flag. */
const headRequired = (why: string) => usageError(`--head <branch> is required here: ${why}`);

/**
 * `cr open` outside a session: the branch checked out in this linked checkout, when the project's repository (the
 * `svc` remote that `svc ship` adds) has it; the CR is opened on what was pushed, so unpushed commits are named.
 */
async function checkedOutBranch(ctx: Context, opts: GlobalOptions): Promise<string> {
  const link = findLink();
  if (!link)
    throw headRequired("outside a session, the default is the branch of a linked checkout, and none is linked");
  const named = opts.project ?? readCliEnv().projectId;
  if (named && named !== link.link.project_id)
    throw headRequired(`this checkout is linked to another project (${link.link.project_id})`);
  const { git, bearer } = await import("./ship.ts");
  const cwd = process.cwd();
  const branch = await git(cwd, ["symbolic-ref", "--short", "-q", "HEAD"]);
  if (branch.code !== 0) throw headRequired("no branch is checked out here (not a git checkout, or HEAD is detached)");
  const name = branch.stdout;
  const remote = await git(cwd, ["remote", "get-url", "svc"]);
  if (remote.code !== 0)
    throw headRequired(`this checkout has no 'svc' remote to find ${name} on ('svc ship' adds it and pushes ${name})`);
  const ref = `refs/heads/${name}`;
  const listed = await git(cwd, ["ls-remote", remote.stdout, ref], bearer(ctx.token));
  if (listed.code !== 0)
    throw new CliError(`cannot read the 'svc' remote to find ${name} (pass --head <branch>):\n${listed.stderr}`);
  const pushed = listed.stdout
    .split("\n")
    .map((line) => line.split("\t"))
    .find(([, r]) => r === ref)?.[0];
  if (!pushed)
    throw headRequired(`${name}, checked out here, is not pushed to the 'svc' remote; push it ('svc ship') first`);
  const local = await git(cwd, ["rev-parse", "--verify", "-q", "HEAD"]);
  if (local.stdout !== pushed)
    warn(
      `${name} here differs from the pushed ${name} (${pushed.slice(0, 12)}): the CR shows what is pushed; 'svc ship' pushes the rest`,
    );
  info(`head: ${name} (checked out here, pushed to the 'svc' remote)`);
  return name;
}

/**
 * A refused head or base, with the flag that fixes it: a branch the project's repository does not have (the flags
 * take branch names), or the checked-out branch taken as the head while it is the base itself.
 */
function branchHint(err: unknown, checkedOut: string | undefined): never {
  if (checkedOut && err instanceof ApiRequestError && err.code === "SAME_REF")
    throw headRequired(`${checkedOut}, checked out here, is the base itself; name the branch to merge from`);
  if (err instanceof ApiRequestError && err.code === "BRANCH_NOT_FOUND") {
    const flag = err.body?.field === "base_ref" ? "--base" : err.body?.field === "head_ref" ? "--head" : undefined;
    if (flag)
      throw new CliError(`${err.message}; ${flag} takes the name of a branch pushed to the project`, err.exitCode);
  }
  throw err;
}

export function crCommand(): Command {
  const cr = new Command("cr").description("change requests: the only way work reaches the default branch");

  cr.command("ls")
    .description("list change requests")
    .addOption(
      new Option("--status <status>", "which ones").choices(["open", "merged", "closed", "all"]).default("open"),
    )
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (_o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand<{ status: string }>(cmd, "change-requests");
      const { status } = opts;
      const { change_requests } = await ctx.client.request("GET", path(), ChangeRequestList, { query: { status } });
      if (opts.json) return printJson(change_requests);
      if (change_requests.length === 0) return info(`no ${status === "all" ? "" : `${status} `}change requests`);
      printTable(
        // CHECKS comes last: the columns scripts cut by position stay where they were.
        change_requests.map((c) => [
          `#${c.number}`,
          c.status,
          `${c.head_ref} -> ${c.base_ref}`,
          c.title,
          checksCell(c),
        ]),
        { header: ["CR", "STATUS", "BRANCHES", "TITLE", "CHECKS"] },
      );
    });

  cr.command("show")
    .alias("info")
    .description("one change request; for an open one also its merge preview")
    .argument("<cr>", "number (3 or #3) or id")
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand(cmd, "change-requests");
      const change = await get(ctx, path(`/${id}`));
      const preview =
        change.status === "open"
          ? await ctx.client.request("GET", path(`/${id}/merge-preview`), MergePreview).catch(() => undefined)
          : undefined;
      if (opts.json) return printJson({ change_request: change, merge_preview: preview ?? null });
      printCr(change, preview);
    });

  cr.command("diff")
    .description("the unified diff of a change request")
    .argument("<cr>", "number (3 or #3) or id")
    .option("--no-color", "never colour the output")
    .addOption(projectOption())
    .option("--json", "output JSON (patch and files)")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand<{ color?: boolean }>(cmd, "change-requests");
      const diff = await ctx.client.request("GET", path(`/${id}/diff`), Diff);
      if (opts.json) return printJson(diff);
      const color = useColor(opts.color);
      process.stdout.write(color ? colorPatch(diff.patch) : diff.patch);
    });

  cr.command("open")
    .aliases(["new", "create"])
    .description("open a change request from a branch")
    .requiredOption("--title <text>", "what the change does")
    .option("--description <text>", "details")
    .addOption(new Option("--body <text>", "alias of --description").hideHelp())
    .option(
      "--head <branch>",
      "branch to merge from (default: the session branch; outside a session, the branch checked out here once pushed)",
    )
    .addOption(new Option("--from <branch>", "alias of --head").hideHelp())
    .option("--base <branch>", "branch to merge into, by name (default: the project's default branch)")
    .addOption(new Option("--into <branch>", "alias of --base").hideHelp())
    .option("--session <id>", "session that opened it (default: SVC_SESSION_ID)")
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (_o, cmd: Command) => {
      const o = optionsOf<Record<string, string | undefined>>(cmd);
      const env = readCliEnv();
      if (!o.title?.trim()) throw usageError("--title must not be empty");
      const { opts, ctx, path } = projectCommand(cmd, "change-requests");
      const given = o.head ?? o.from ?? env.branchName ?? env.headRef;
      const head = given ?? (await checkedOutBranch(ctx, opts));
      const body = {
        title: o.title,
        description: o.description ?? o.body,
        head_ref: head,
        base_ref: o.base ?? o.into,
        session_id: o.session ?? env.sessionId,
      };
      const created = await ctx.client
        .request("POST", path(), ChangeRequest, { body })
        .catch((err) => branchHint(err, given === undefined ? head : undefined));
      if (opts.json) return printJson(created);
      info(`✓ opened CR #${created.number}: ${created.title} (${created.head_ref} -> ${created.base_ref})`);
      printLine(`#${created.number}`);
    });

  cr.command("merge")
    .description("merge an open change request, or (--auto) queue it to merge once its checks pass")
    .argument("<cr>", "number (3 or #3) or id")
    .option("--message <text>", "merge commit message (default: Merge CR #<n>: <title>)")
    .option(
      "--match-head-commit <sha>",
      "merge only if the head is still this commit (default: the head as this command reads it)",
      parseCommitSha,
    )
    // The queue merges whatever head passes its checks, with its own message: neither flag means anything there.
    .addOption(
      new Option("--auto", "merge by itself once its checks pass and nothing conflicts (the merge queue)").conflicts([
        "message",
        "matchHeadCommit",
      ]),
    )
    .addOption(
      new Option("--cancel-auto", "take it out of the merge queue").conflicts(["auto", "message", "matchHeadCommit"]),
    )
    .addOption(projectOption())
    .option("--json", "output JSON")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand<{
        message?: string;
        matchHeadCommit?: string;
        auto?: boolean;
        cancelAuto?: boolean;
      }>(cmd, "change-requests");
      if (opts.auto || opts.cancelAuto) return setAutoMerge(ctx, path, id, Boolean(opts.auto), opts.json);
      // The head named is the one merged, or nothing: commits pushed after it was read never land unseen.
      const headSha = opts.matchHeadCommit ?? (await get(ctx, path(`/${id}`))).head_commit_sha ?? undefined;
      const merged = await ctx.client.request("POST", path(`/${id}/merge`), ChangeRequest, {
        body: { message: opts.message, head_sha: headSha },
      });
      if (opts.json) return printJson(merged);
      const how = merged.merge_commit_sha === merged.head_commit_sha ? "fast-forward" : "merge commit";
      info(`✓ merged CR #${merged.number} into ${merged.base_ref} (${how} ${merged.merge_commit_sha?.slice(0, 12)})`);
      printLine(merged.merge_commit_sha ?? "");
    });

  for (const [verb, describe, done] of [
    ["close", "close an open change request without merging", "closed"],
    ["reopen", "reopen a closed change request", "reopened"],
  ] as const) {
    cr.command(verb)
      .description(describe)
      .argument("<cr>", "number (3 or #3) or id")
      .addOption(projectOption())
      .option("--json", "output JSON")
      .action(async (ref: string, _o, cmd: Command) => {
        const id = parseCrRef(ref);
        const { opts, ctx, path } = projectCommand(cmd, "change-requests");
        const result = await ctx.client.request("POST", path(`/${id}/${verb}`), ChangeRequest);
        if (opts.json) return printJson(result);
        info(`✓ ${done} CR #${result.number}`);
      });
  }
  reviewCommands(cr);
  checksCommand(cr);
  approvalCommands(cr);
  return cr;
}
