import type { ChangeRequest } from "../../../protocol/change-request.ts";
import { checkDuration } from "../../../protocol/check-duration.ts";
import { type CheckRun, FINISHED_CHECK_STATUSES } from "../../../protocol/cr-check.ts";
import { plainText } from "../../../protocol/terminal-text.ts";
import { type Html, html } from "../html.ts";
import { csrfField } from "../layout.ts";
import type { Part } from "../part.ts";
import { approvalsMissing } from "./cr-approvals.ts";

export const CR_CHECKS_SCRIPT_PATH = "/dashboard/assets/cr-checks.js";

/**
 * Whether the page should follow the CR: a check queued or running, a head whose checks are about to be queued, or
 * a CR waiting in the merge queue (which merges it, or lets it go with a note, once they finish).
 */
export function checksLive(cr: ChangeRequest, runs: readonly CheckRun[]): boolean {
  if (cr.status !== "open") return false;
  return (
    cr.checks_status === "pending" || cr.auto_merge || runs.some((r) => !FINISHED_CHECK_STATUSES.includes(r.status))
  );
}

/**
 * Why Merge is disabled, in words: checks that have not passed, approvals missing; undefined when it is not. A
 * conflict keeps Merge, whose refusal names the files.
 */
export function mergeBlocked(cr: ChangeRequest): string | undefined {
  if (cr.status !== "open") return undefined;
  if (cr.checks_status === "pending") return "Checks have not passed yet: they have not finished.";
  if (cr.checks_status === "failed") return "Checks have not passed: push a fix, and they run again.";
  return approvalsMissing(cr);
}

/**
 * What a change of the CR means a new page rather than an updated section: merged or closed, into or out of the
 * merge queue. The page's script reloads when the live answer's state differs from the page's.
 */
export const pageState = (cr: ChangeRequest) => `${cr.status}:${cr.auto_merge}:${cr.auto_merge_note ?? ""}`;

/** A failed check's log is what a person came for: open. A passed one folds away; a running one shows its progress. */
function checkItem(run: CheckRun, now: number): Html {
  const open = run.status !== "passed";
  const exit = run.exit_code === null ? "" : ` · exit ${run.exit_code}`;
  // A check's log is whatever the CR's code printed: its escape sequences would show as noise.
  const log = plainText(run.log);
  const body =
    run.status === "queued"
      ? html`<p class="muted">Waiting for a sandbox.</p>`
      : log
        ? html`<pre class="check-log">${log}</pre>`
        : html`<p class="muted">No output${run.status === "running" ? " yet" : ""}.</p>`;
  return html`<li class="check" data-name="${run.name}" data-status="${run.status}"><details${open ? html` open` : ""}>
<summary><span class="mono">${run.name}</span> <span class="badge ${run.status}">${run.status}</span><span class="muted">${exit} · ${checkDuration(run, now)}</span></summary>
${body}
</details></li>`;
}

/** The part of the section the page's script replaces with each live answer. */
export function checksBody(cr: ChangeRequest, runs: readonly CheckRun[], now = Date.now()): Html {
  if (runs.length === 0)
    return cr.checks_status === "pending"
      ? html`<p class="muted">The checks of this head are about to be queued.</p>`
      : html`<p class="muted">No checks: <code>[[checks]]</code> in the default branch's svc.toml names the commands every new head must pass.</p>`;
  return html`<ul class="checks">${runs.map((r) => checkItem(r, now))}</ul>`;
}

/** `/dashboard/projects/{id}/crs/{n}`'s Checks section: each check of the current head, kept current by a script. */
export function checksSection(crPath: string, cr: ChangeRequest, checks: Part<CheckRun[]>): Html {
  const live = checks.ok && checksLive(cr, checks.value);
  const summary =
    cr.checks_status !== "none" && html` <span class="badge ${cr.checks_status}">${cr.checks_status}</span>`;
  const body = checks.ok ? checksBody(cr, checks.value) : html`<p class="notice error">${checks.reason}</p>`;
  return html`<section aria-labelledby="checks" id="checks-section" data-poll="${crPath}/checks" data-state="${pageState(cr)}">
<h2 id="checks">Checks${summary}</h2>
<div id="checks-body" aria-live="polite">${body}</div>
</section>
${live && html`<script src="${CR_CHECKS_SCRIPT_PATH}" defer></script>`}`;
}

/** Merge, disabled with the reason while the checks have not passed; the script enables it when they do. */
export function mergeButton(cr: ChangeRequest): Html {
  const blocked = mergeBlocked(cr);
  return html`<button type="submit" class="primary" id="merge-button" aria-describedby="merge-blocked"${blocked ? html` disabled` : ""}>Merge</button>
<p class="muted" id="merge-blocked"${blocked ? "" : html` hidden`}>${blocked ?? ""}</p>`;
}

/** Where the CR stands in the merge queue: waiting in it, or let go with the reason. */
export function autoMergeState(cr: ChangeRequest): Html {
  if (cr.status !== "open") return html``;
  if (cr.auto_merge)
    return html`<p class="notice info" id="auto-merge-state">Merges by itself once its checks pass${
      cr.required_approvals > 0 && " and it has its approvals"
    }.</p>`;
  return cr.auto_merge_note
    ? html`<p class="notice info" id="auto-merge-note">Auto-merge stopped: ${cr.auto_merge_note}</p>`
    : html``;
}

/**
 * The merge queue's toggle, through the same service as `svc cr merge --auto`: "Merge when checks pass", and once
 * queued "Cancel auto-merge". A project without checks has no use for it.
 */
export function autoMergeForm(crPath: string, cr: ChangeRequest, csrf: string): Html {
  if (cr.status !== "open" || (cr.checks_status === "none" && !cr.auto_merge)) return html``;
  const button = cr.auto_merge
    ? html`<button type="submit" name="on" value="0">Cancel auto-merge</button>`
    : html`<button type="submit" name="on" value="1">Merge when checks pass</button>`;
  return html`<form method="post" action="${crPath}/auto-merge">${csrfField(csrf)}${button}</form>`;
}
