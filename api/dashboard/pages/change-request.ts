import type { ChangeRequest, Diff, DiffFile, MergePreview } from "../../../protocol/change-request.ts";
import type { Project } from "../../../protocol/project.ts";
import { type Html, html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";
import type { Part } from "../part.ts";

export type ChangeRequestView = {
  project: Project;
  cr: ChangeRequest;
  preview: Part<MergePreview>;
  diff: Part<Diff>;
  /** Why the last action was refused (a 409), in words. */
  refusal?: string;
};

/** The files of a diff open at first sight only while the whole diff stays short; larger ones open on demand. */
const OPEN_DIFF_LINES = 400;

/** The unified patch cut at each file's `diff --git` line, in the order git lists the files. */
export function patchPerFile(patch: string): string[][] {
  const files: string[][] = [];
  for (const line of patch.split("\n")) {
    if (line.startsWith("diff --git ")) files.push([]);
    files.at(-1)?.push(line);
  }
  return files;
}

function lineClass(line: string): string {
  if (line.startsWith("@@")) return "l hunk";
  if (line.startsWith("+") && !line.startsWith("+++ ")) return "l add";
  if (line.startsWith("-") && !line.startsWith("--- ")) return "l del";
  return "l";
}

function fileBlock(file: DiffFile, lines: string[] | undefined, open: boolean): Html {
  // The file header (diff --git, index, ---/+++) repeats what the summary says.
  const body = (lines ?? []).slice((lines ?? []).findIndex((l) => l.startsWith("@@")));
  const content = file.binary
    ? html`<p class="muted">Binary file.</p>`
    : body.length === 0 || !lines?.some((l) => l.startsWith("@@"))
      ? html`<p class="muted">No line changes.</p>`
      : html`<pre>${body.map((l) => html`<span class="${lineClass(l)}">${l}</span>`)}</pre>`;
  return html`<details class="file"${open ? html` open` : ""}>
<summary><span class="mono">${file.old_path ? `${file.old_path} → ` : ""}${file.path}</span> <span class="badge">${file.status}</span> <span class="add-count">+${file.additions}</span> <span class="del-count">−${file.deletions}</span></summary>
${content}
</details>`;
}

function diffSection(diff: Diff): Html {
  if (diff.files.length === 0) return html`<p class="muted">No changes between the branches.</p>`;
  const chunks = patchPerFile(diff.patch);
  const adds = diff.files.reduce((n, f) => n + f.additions, 0);
  const dels = diff.files.reduce((n, f) => n + f.deletions, 0);
  const open = adds + dels <= OPEN_DIFF_LINES;
  return html`<p>${diff.files.length} ${diff.files.length === 1 ? "file" : "files"} changed, <span class="add-count">+${adds}</span> <span class="del-count">−${dels}</span></p>
${diff.files.map((file, i) => fileBlock(file, chunks[i], open))}`;
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

/** SPEC's CR state rules: an open CR merges or closes, a closed one reopens, a merged one is done. */
function actions(view: ChangeRequestView, csrf: string): Html {
  const base = `/dashboard/projects/${view.project.id}/crs/${view.cr.number}`;
  const { status } = view.cr;
  if (status === "merged") return html``;
  if (status === "closed")
    return html`<div class="actions"><form method="post" action="${base}/reopen">${csrfField(csrf)}<button type="submit">Reopen</button></form></div>`;
  // Merge lands the head whose changes this page shows, or nothing (409 HEAD_MOVED, the page shown again).
  const shown = view.diff.ok ? view.diff.value.head_sha : view.cr.head_commit_sha;
  return html`<div class="actions">
<form method="post" action="${base}/merge">${csrfField(csrf)}
${shown && html`<input type="hidden" name="head_sha" value="${shown}">`}
<label for="merge-message">Merge message (optional)</label>
<textarea id="merge-message" name="message" rows="2" placeholder="Merge CR #${view.cr.number}: ${view.cr.title}"></textarea>
<button type="submit" class="primary">Merge</button>
</form>
<form method="post" action="${base}/close">${csrfField(csrf)}<button type="submit">Close</button></form>
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
<section aria-labelledby="merge"><h2 id="merge">Merge</h2>
${cr.status === "merged" ? mergedLine(cr) : part(view.preview, (p) => previewSection(cr, p))}
${actions(view, csrf)}
</section>
<section aria-labelledby="changes"><h2 id="changes">Changes</h2>${part(view.diff, diffSection)}</section>`,
  });
}
