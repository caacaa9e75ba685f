import { setTimeout as sleep } from "node:timers/promises";
import type { Command } from "commander";
import { ChangeRequest, ChangeRequestEnvelope } from "../../protocol/change-request.ts";
import { checkDuration } from "../../protocol/check-duration.ts";
import { type CheckRun, CheckRunList, FINISHED_CHECK_STATUSES } from "../../protocol/cr-check.ts";
import { plainText } from "../../protocol/terminal-text.ts";
import type { Context } from "../context.ts";
import { parseCrRef } from "../cr-ref.ts";
import { CliError } from "../errors.ts";
import { info, printJson, printLine, warn } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { createSpinner } from "../spinner.ts";
import { printTable } from "../table.ts";

const POLL_MS = 1000;
/** What of a failed check's log is printed: its end says why it failed. */
const LOG_TAIL_LINES = 20;

type Checks = { cr: ChangeRequest; runs: CheckRun[] };

const unfinished = (runs: CheckRun[]) => runs.filter((r) => !FINISHED_CHECK_STATUSES.includes(r.status));
const failed = (runs: CheckRun[]) => runs.filter((r) => r.status === "failed" || r.status === "error");
const named = (runs: CheckRun[]) =>
  `${runs.length === 1 ? "check" : "checks"} ${runs.map((r) => `'${r.name}'`).join(", ")}`;

/**
 * The CR first, then its runs: a run that finishes between the two reads leaves the CR `pending`, and the next read
 * looks again, never the other way round.
 */
async function readChecks(ctx: Context, path: (suffix?: string) => string, id: string): Promise<Checks> {
  const cr = (await ctx.client.request("GET", path(`/${id}`), ChangeRequestEnvelope)).change_request;
  const runs = await ctx.client.request("GET", path(`/${id}/checks`), CheckRunList);
  return { cr, runs };
}

/**
 * Whether the checks have said all they will about the CR's head: nothing queued or running, and not `pending`
 * either (a head just pushed has no runs until the scheduler queues them). Only an open CR's checks run.
 */
function settled({ cr, runs }: Checks): boolean {
  if (cr.status !== "open") return true;
  return unfinished(runs).length === 0 && cr.checks_status !== "pending";
}

/** Why the checks do not let the CR merge, for stderr and exit 1; undefined when they all passed or there are none. */
function verdict({ cr, runs }: Checks): string | undefined {
  const bad = failed(runs);
  if (bad.length > 0) return `CR #${cr.number}: ${named(bad)} failed`;
  const waiting = unfinished(runs);
  if (waiting.length > 0)
    return `CR #${cr.number}: ${named(waiting)} ${waiting.length === 1 ? "has" : "have"} not finished (--wait waits for them)`;
  if (cr.status === "open" && cr.checks_status === "pending")
    return `CR #${cr.number}: the checks of its head are not queued yet (--wait waits for them)`;
  return undefined;
}

function printChecks({ cr, runs }: Checks): void {
  if (runs.length === 0) {
    info(
      cr.status === "open" && cr.checks_status === "pending"
        ? `no checks have run on CR #${cr.number}'s head yet`
        : `no checks: svc.toml on the default branch names none ([[checks]])`,
    );
    return;
  }
  const now = Date.now();
  printTable(
    runs.map((r) => [r.name, r.status, r.exit_code === null ? "-" : String(r.exit_code), checkDuration(r, now)]),
    { header: ["NAME", "STATUS", "EXIT", "DURATION"] },
  );
  for (const run of failed(runs)) {
    const lines = run.log.replace(/\n$/, "").split("\n");
    const tail = lines.slice(-LOG_TAIL_LINES);
    const shown = tail.length < lines.length ? `the last ${tail.length} of its ${lines.length} lines` : "its log";
    // The log is what the CR's own code printed: no escape sequence of it reaches the terminal.
    printLine(`\n${run.name} ${run.status}${run.exit_code === null ? "" : ` (exit ${run.exit_code})`}; ${shown}:`);
    printLine(plainText(run.log ? tail.join("\n") : "(empty)"));
  }
}

/** `waiting for checks: 'unit' running, 'lint' queued`: what a waiting terminal shows on stderr. */
function waitingLine({ cr, runs }: Checks): string {
  const waiting = unfinished(runs);
  if (waiting.length === 0) return `waiting for the checks of CR #${cr.number} to be queued`;
  return `waiting for checks: ${waiting.map((r) => `'${r.name}' ${r.status}`).join(", ")}`;
}

/** Polls until the checks settle, or until Ctrl-C, which stops the wait and shows the checks as they stand. */
async function waitForChecks(read: () => Promise<Checks>, first: Checks): Promise<Checks> {
  const stop = new AbortController();
  const interrupt = () => stop.abort();
  process.once("SIGINT", interrupt);
  const spinner = createSpinner();
  let checks = first;
  try {
    while (!settled(checks)) {
      spinner.update(waitingLine(checks).slice(0, (process.stderr.columns || 80) - 3));
      // Ctrl-C ends the pause at once (an AbortError, which is the way out here).
      await sleep(POLL_MS, undefined, { signal: stop.signal }).catch(() => {});
      if (stop.signal.aborted) break;
      checks = await read();
    }
  } finally {
    process.off("SIGINT", interrupt);
    spinner.stop();
  }
  if (stop.signal.aborted) info("stopped waiting");
  return checks;
}

/** The CR's review state for `svc cr show`: its checks, its approvals and its place in the merge queue. */
export function reviewLines(cr: ChangeRequest): string[] {
  const lines: string[] = [];
  if (cr.status === "open" && cr.checks_status !== "none")
    lines.push(`checks:   ${cr.checks_status} (svc cr checks ${cr.number})`);
  if (cr.status === "open" && (cr.required_approvals > 0 || cr.approvals > 0))
    lines.push(
      `approved: ${cr.approvals}/${cr.required_approvals} approvals of its head (svc cr approve ${cr.number})`,
    );
  if (cr.auto_merge) lines.push("auto:     merges by itself once its checks pass (svc cr merge --cancel-auto)");
  else if (cr.auto_merge_note) lines.push(`auto:     left the merge queue: ${cr.auto_merge_note}`);
  return lines;
}

/** The CHECKS cell of `svc cr ls`: its checks in one word, and whether it waits to merge by itself. */
export function checksCell(cr: ChangeRequest): string {
  const parts = [
    cr.status === "open" && cr.checks_status !== "none" && cr.checks_status,
    cr.auto_merge && "auto-merge",
  ];
  return parts.filter(Boolean).join(", ") || "-";
}

/**
 * `svc cr merge <n> --auto` puts the CR in its base's merge queue, to merge as this person once its checks pass
 * and nothing conflicts; `--cancel-auto` takes it out.
 */
export async function setAutoMerge(
  ctx: Context,
  path: (suffix?: string) => string,
  id: string,
  on: boolean,
  json: boolean | undefined,
): Promise<void> {
  const cr = await ctx.client.request("POST", path(`/${id}/merge`), ChangeRequest, { body: { auto: on } });
  if (json) return printJson(cr);
  if (!on) return info(`✓ CR #${cr.number} left the merge queue: it merges only when someone merges it`);
  info(`✓ CR #${cr.number} will merge when its checks pass`);
  // Queued, it waits for its approvals too: said now, or the wait would look like a stuck queue.
  if (cr.approvals < cr.required_approvals)
    info(
      `it merges once it has ${cr.required_approvals} approvals too (${cr.approvals} so far: svc cr approve ${cr.number})`,
    );
  // The queue lets a CR with failed checks go at its next step: only a new head gets new checks.
  if (cr.checks_status === "failed")
    warn(`its checks failed on the current head, so the merge queue will let it go (svc cr checks ${cr.number})`);
}

/** `svc cr checks`: the default branch's [[checks]] on a CR's current head, added to `svc cr`. */
export function checksCommand(cr: Command): void {
  cr.command("checks")
    .description("a change request's checks on its current head; exit 1 unless every one passed")
    .argument("<cr>", "number (3 or #3) or id")
    .option("--wait", "wait until no check is queued or running (Ctrl-C stops waiting)")
    .addOption(projectOption())
    .option("--json", "output JSON (the runs as the API answers them)")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand<{ wait?: boolean }>(cmd, "change-requests");
      const read = () => readChecks(ctx, path, id);
      let checks = await read();
      if (opts.wait) checks = await waitForChecks(read, checks);
      if (opts.json) printJson(checks.runs);
      else printChecks(checks);
      const why = verdict(checks);
      if (why) throw new CliError(why);
    });
}
