import type { ChangeRequest, Diff, DiffFile, MergePreview } from "../../../protocol/change-request.ts";
import type { CrApproval } from "../../../protocol/cr-approval.ts";
import type { CheckRun } from "../../../protocol/cr-check.ts";
import type { CrComment } from "../../../protocol/cr-comment.ts";
import type { Project } from "../../../protocol/project.ts";
import { numberedLines, type PatchLine, patchPerFile } from "../../git/diff-lines.ts";
import { type Html, html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";
import type { Part } from "../part.ts";
import { approvalsSection } from "./cr-approvals.ts";
import { autoMergeForm, autoMergeState, checksSection, mergeButton } from "./cr-checks.ts";

export type ChangeRequestView = {
  project: Project;
  cr: ChangeRequest;
  preview: Part<MergePreview>;
  diff: Part<Diff>;
  /** Why the last action was refused (a 409), in words. */
  refusal?: string;
  comments: Part<CrComment[]>;
  /** The checks of the CR's current head and base. */
  checks: Part<CheckRun[]>;
  /** Every approval of the CR, earlier heads' too. */
  approvals: Part<CrApproval[]>;
  /** The signed-in person: the CR's author gets no Approve button. */
  viewerId: string;
  /** The diff line whose comment form is open: the one a person clicked. */
  lineTarget?: LineTarget;
};

export type LineTarget = { path: string; line: number };

/** Who the page is for: the signed-in person (the CR's author gets no Approve button) and their form token. */
export type CrViewer = { userId: string; csrf: string };

/** The files of a diff open at first sight only while the whole diff stays short; larger ones open on demand. */
const OPEN_DIFF_LINES = 400;

const LINE_CLASS: Record<PatchLine["kind"], string> = {
  hunk: "l hunk",
  add: "l add",
  del: "l del",
  context: "l",
  note: "l",
};

/** A line of the head's side is a link that opens its comment form: a plain page, no script. */
function diffLine(path: string, line: PatchLine): Html {
  if (line.newLine === null) return html`<span class="${LINE_CLASS[line.kind]}">${line.text}</span>`;
  const href = `?${new URLSearchParams({ path, line: String(line.newLine) })}#line-comment`;
  return html`<span class="${LINE_CLASS[line.kind]}"><a href="${href}">${line.text}</a></span>`;
}

/** The two ways to send a comment; a merged CR's agent no longer updates it. */
const commentButtons = (cr: ChangeRequest) =>
  html`<div class="buttons"><button type="submit">Comment</button>${
    cr.status !== "merged" && html`<button type="submit" name="to_agent" value="1">Send to agent</button>`
  }</div>`;

function lineCommentForm(view: ChangeRequestView, csrf: string, target: LineTarget): Html {
  return html`<form method="post" action="${crPath(view)}/comments" class="line-comment" id="line-comment">${csrfField(csrf)}
<input type="hidden" name="path" value="${target.path}"><input type="hidden" name="line" value="${target.line}">
<label for="line-comment-body">Comment on ${target.path} line ${target.line}</label>
<textarea id="line-comment-body" name="body" rows="3" required></textarea>
${commentButtons(view.cr)}
</form>`;
}

function fileBlock(view: ChangeRequestView, csrf: string, file: DiffFile, chunk: string[] | undefined, open: boolean) {
  // The file header (diff --git, index, ---/+++) repeats what the summary says.
  const lines = numberedLines(chunk ?? []);
  const target = view.lineTarget?.path === file.path ? view.lineTarget : undefined;
  const content = file.binary
    ? html`<p class="muted">Binary file.</p>`
    : lines.length === 0
      ? html`<p class="muted">No line changes.</p>`
      : html`<pre>${lines.map((l) => diffLine(file.path, l))}</pre>`;
  return html`<details class="file"${open || target ? html` open` : ""}>
<summary><span class="mono">${file.old_path ? `${file.old_path} → ` : ""}${file.path}</span> <span class="badge">${file.status}</span> <span class="add-count">+${file.additions}</span> <span class="del-count">−${file.deletions}</span></summary>
${content}
${target && lineCommentForm(view, csrf, target)}
</details>`;
}

function diffSection(view: ChangeRequestView, csrf: string, diff: Diff): Html {
  if (diff.files.length === 0) return html`<p class="muted">No changes between the branches.</p>`;
  const chunks = patchPerFile(diff.patch);
  const adds = diff.files.reduce((n, f) => n + f.additions, 0);
  const dels = diff.files.reduce((n, f) => n + f.deletions, 0);
  const open = adds + dels <= OPEN_DIFF_LINES;
  return html`<p>${diff.files.length} ${diff.files.length === 1 ? "file" : "files"} changed, <span class="add-count">+${adds}</span> <span class="del-count">−${dels}</span></p>
${diff.files.map((file, i) => fileBlock(view, csrf, file, chunks[i], open))}`;
}

const stamp = (at: string) => at.slice(0, 16).replace("T", " ");

function commentItem(project: Project, c: CrComment): Html {
  const where = c.path && html` · <code>${c.path}${c.line ? `:${c.line}` : ""}</code>`;
  const session = c.session_id
    ? html`<a href="/dashboard/projects/${project.id}/sessions/${c.session_id}">session ${c.session_id.slice(0, 8)}</a>`
    : "a removed session";
  const agent =
    c.to_agent &&
    html` · sent to agent → ${session} <span class="badge ${c.delivery ?? ""}">${c.delivery}</span>${
      c.delivery_error && html` <span class="muted">${c.delivery_error}</span>`
    }`;
  return html`<li class="comment" id="comment-${c.id}"><p class="muted"><strong>${c.author}</strong> · <time datetime="${c.created_at}">${stamp(c.created_at)}</time>${where}${
    c.kind === "resolve" && html` · <span class="badge">resolve conflicts</span>`
  }${agent}</p><pre class="description">${c.body}</pre></li>`;
}

function commentsSection(view: ChangeRequestView, csrf: string): Html {
  const list = part(view.comments, (comments) =>
    comments.length === 0
      ? html`<p class="muted">No comments yet.</p>`
      : html`<ol class="comments">${comments.map((c) => commentItem(view.project, c))}</ol>`,
  );
  return html`<section aria-labelledby="comments"><h2 id="comments">Comments</h2>
${list}
<form method="post" action="${crPath(view)}/comments" class="comment-box">${csrfField(csrf)}
<label for="comment-body">Comment</label>
<textarea id="comment-body" name="body" rows="3" required></textarea>
${commentButtons(view.cr)}
<p class="muted">Click a line of the diff to comment on it. Send to agent makes the comment a prompt for the CR's agent, whose push updates this CR.</p>
</form>
</section>`;
}

const mergedLine = (cr: ChangeRequest) =>
  html`<p><span class="badge merged">merged</span> as <code>${cr.merge_commit_sha?.slice(0, 12) ?? "-"}</code></p>`;

function previewSection(cr: ChangeRequest, preview: MergePreview): Html {
  if (preview.merge_base === null)
    return html`<p><span class="badge conflicts">cannot merge</span> the branches have unrelated histories.</p>`;
  if (preview.is_up_to_date)
    return html`<p><span class="badge clean">up to date</span> ${cr.base_ref} already has every commit of ${cr.head_ref}; merging marks the CR merged.</p>`;
  if (!preview.can_merge)
    return html`<p><span class="badge conflicts">conflicts</span> in ${preview.conflicts.length} ${preview.conflicts.length === 1 ? "file" : "files"}:</p>
<ul class="conflicts">${preview.conflicts.map((path) => html`<li><code>${path}</code></li>`)}</ul>`;
  if (preview.can_fast_forward)
    return html`<p><span class="badge clean">fast-forward</span> ${cr.base_ref} moves to ${cr.head_ref}'s tip.</p>`;
  return html`<p><span class="badge clean">clean</span> a merge commit joins ${cr.head_ref} into ${cr.base_ref}.</p>`;
}

/** The head whose changes the page shows: what Merge and Approve act on. */
const shownHead = (view: ChangeRequestView) => (view.diff.ok ? view.diff.value.head_sha : view.cr.head_commit_sha);

const crPath = (view: ChangeRequestView) => `/dashboard/projects/${view.project.id}/crs/${view.cr.number}`;

/** SPEC's CR state rules: an open CR merges or closes, a closed one reopens, a merged one is done. */
function actions(view: ChangeRequestView, csrf: string): Html {
  const base = crPath(view);
  const { status } = view.cr;
  if (status === "merged") return html``;
  if (status === "closed")
    return html`<div class="actions"><form method="post" action="${base}/reopen">${csrfField(csrf)}<button type="submit">Reopen</button></form></div>`;
  // Merge lands the head whose changes this page shows, or nothing (409 HEAD_MOVED, the page shown again).
  const shown = shownHead(view);
  return html`<div class="actions">
<form method="post" action="${base}/merge">${csrfField(csrf)}
${shown && html`<input type="hidden" name="head_sha" value="${shown}">`}
<label for="merge-message">Merge message (optional)</label>
<textarea id="merge-message" name="message" rows="2" placeholder="Merge CR #${view.cr.number}: ${view.cr.title}"></textarea>
${mergeButton(view.cr)}
</form>
${autoMergeForm(base, view.cr, csrf)}
<form method="post" action="${base}/close">${csrfField(csrf)}<button type="submit">Close</button></form>
${
  view.preview.ok &&
  view.preview.value.conflicts.length > 0 &&
  html`<form method="post" action="${base}/resolve">${csrfField(csrf)}<button type="submit">Resolve conflicts</button></form>`
}
</div>`;
}

const part = <T>(p: Part<T>, render: (value: T) => Html) =>
  p.ok ? render(p.value) : html`<p class="notice error">${p.reason}</p>`;

/** `/dashboard/projects/{id}/crs/{n}`: metadata, merge preview, the diff file by file, and the actions. */
export function changeRequestPage(view: ChangeRequestView, csrf: string): string {
  const { cr, project } = view;
  return layout({
    title: `#${cr.number} ${cr.title}`,
    csrf,
    body: html`<p><a href="/dashboard/projects/${project.id}">${project.name}</a></p>
<h1>#${cr.number} ${cr.title} <span class="badge ${cr.status}" id="cr-status">${cr.status}</span></h1>
${view.refusal && html`<p class="notice error" role="alert">${view.refusal}</p>`}
<section aria-labelledby="about"><h2 id="about">About</h2>
<p class="mono">${cr.head_ref} → ${cr.base_ref}</p>
<p class="muted">opened ${cr.created_at.slice(0, 16).replace("T", " ")}${cr.merged_at && ` · merged ${cr.merged_at.slice(0, 16).replace("T", " ")}`}${
      cr.closed_at && ` · closed ${cr.closed_at.slice(0, 16).replace("T", " ")}`
    }${cr.origin_session_id && html` · from session <a href="/dashboard/projects/${project.id}/sessions/${cr.origin_session_id}">${cr.origin_session_id.slice(0, 8)}</a>`}</p>
${cr.description && html`<pre class="description">${cr.description}</pre>`}
</section>
${checksSection(crPath(view), cr, view.checks)}
${approvalsSection(crPath(view), cr, view.approvals, view.viewerId, shownHead(view), csrf)}
<section aria-labelledby="merge"><h2 id="merge">Merge</h2>
${cr.status === "merged" ? mergedLine(cr) : part(view.preview, (p) => previewSection(cr, p))}
${autoMergeState(cr)}
${actions(view, csrf)}
</section>
${commentsSection(view, csrf)}
<section aria-labelledby="changes"><h2 id="changes">Changes</h2>${part(view.diff, (diff) => diffSection(view, csrf, diff))}</section>`,
  });
}
