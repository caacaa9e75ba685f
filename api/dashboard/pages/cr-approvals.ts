import type { ChangeRequest } from "../../../protocol/change-request.ts";
import type { CrApproval } from "../../../protocol/cr-approval.ts";
import { type Html, html } from "../html.ts";
import { csrfField } from "../layout.ts";
import type { Part } from "../part.ts";

/** Why approvals keep Merge disabled, in words; undefined when the CR has as many as it needs. */
export function approvalsMissing(cr: ChangeRequest): string | undefined {
  if (cr.status !== "open" || cr.approvals >= cr.required_approvals) return undefined;
  const needed = `${cr.required_approvals} ${cr.required_approvals === 1 ? "approval" : "approvals"}`;
  return `Needs ${needed} of its current head (${cr.approvals} so far).`;
}

const stamp = (at: string) => at.slice(0, 16).replace("T", " ");

function approvalItem(a: CrApproval): Html {
  const why = a.counted ? "" : " · no longer counts (an earlier head, or no longer a member)";
  return html`<li class="approval" data-counted="${String(a.counted)}"><strong>${a.user}</strong> approved <code>${a.head_sha.slice(0, 12)}</code> · <time datetime="${a.created_at}">${stamp(a.created_at)}</time><span class="muted">${why}</span></li>`;
}

/**
 * Approve, for an open CR's members other than its author, of the head the page shows (a push since: 409
 * HEAD_MOVED, the page again). Someone who approved that head already is told so instead.
 */
function approveForm(
  crPath: string,
  cr: ChangeRequest,
  approvals: CrApproval[],
  viewerId: string,
  head: string | null,
  csrf: string,
) {
  if (cr.status !== "open" || cr.created_by === viewerId) return html``;
  if (approvals.some((a) => a.counted && a.user_id === viewerId && a.head_sha === head))
    return html`<p class="muted">You approved this head.</p>`;
  return html`<form method="post" action="${crPath}/approve">${csrfField(csrf)}
${head && html`<input type="hidden" name="head_sha" value="${head}">`}
<button type="submit">Approve</button>
</form>`;
}

/**
 * `/dashboard/projects/{id}/crs/{n}`'s Approvals section: who approved which head, how many count of how many the
 * default branch's `[review] required_approvals` asks for, and Approve.
 */
export function approvalsSection(
  crPath: string,
  cr: ChangeRequest,
  approvals: Part<CrApproval[]>,
  viewerId: string,
  head: string | null,
  csrf: string,
): Html {
  const count =
    cr.required_approvals > 0 &&
    html` <span class="badge ${cr.approvals >= cr.required_approvals ? "passed" : "pending"}" id="approvals-count">${cr.approvals}/${cr.required_approvals}</span>`;
  const body = !approvals.ok
    ? html`<p class="notice error">${approvals.reason}</p>`
    : html`${
        approvals.value.length === 0
          ? html`<p class="muted">No approvals yet.</p>`
          : html`<ul class="approvals">${approvals.value.map(approvalItem)}</ul>`
      }${approveForm(crPath, cr, approvals.value, viewerId, head, csrf)}`;
  return html`<section aria-labelledby="approvals"><h2 id="approvals">Approvals${count}</h2>
${body}
</section>`;
}
