import type { ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { StoredRun } from "./store.ts";

/** The lines of a failed check's log its agent gets: the end, where the failure is. */
const TAIL_LINES = 80;

/** What the CR's agent reads when a check failed and `[review] fix_checks` sends it back. */
export function failedCheckPrompt(cr: Pick<ChangeRequestRecord, "number">, run: StoredRun): string {
  const lines = run.log.trimEnd().split("\n");
  const shown = lines.slice(-TAIL_LINES).join("\n");
  const exit = run.exit_code === null ? "did not finish" : `exited with ${run.exit_code}`;
  return [
    `The check "${run.name}" of CR #${cr.number} failed on commit ${run.head_sha.slice(0, 12)}: \`${run.run}\` ${exit}.`,
    lines.length > TAIL_LINES ? `The last ${TAIL_LINES} lines of its output:` : "Its output:",
    "```",
    shown,
    "```",
    "Fix the cause, commit, and push to the same branch (git push origin HEAD) so the CR updates and its checks run again.",
  ].join("\n");
}
