import type { ChangeRequest } from "../../../protocol/change-request.ts";
import type { Project } from "../../../protocol/project.ts";
import type { Session } from "../../../protocol/session.ts";
import { type Html, html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";

export const SESSION_CHAT_SCRIPT_PATH = "/dashboard/assets/session-chat.js";

export type SessionView = {
  project: Project;
  session: Session;
  /** The CRs this session's agent opened (their origin session), newest first. */
  changeRequests: ChangeRequest[];
  /** Why the last action was refused, in words. */
  refusal?: string;
};

const row = (name: string, value: Html | string) => html`<dt>${name}</dt><dd>${value}</dd>`;

/** Stop and restart as SPEC's lifecycle allows them: stop a live sandbox, restart any session. */
function lifecycle(base: string, session: Session, csrf: string): Html {
  const live = session.status === "provisioning" || session.status === "running";
  return html`<div class="actions">
${live && html`<form method="post" action="${base}/stop">${csrfField(csrf)}<button type="submit">Stop</button></form>`}
<form method="post" action="${base}/restart">${csrfField(csrf)}<button type="submit">Restart</button></form>
</div>`;
}

function previewForm(base: string, csrf: string): Html {
  return html`<form method="post" action="${base}/preview" class="inline">${csrfField(csrf)}
<label for="preview-port">Port</label>
<input id="preview-port" name="port" type="number" min="1" max="65535" value="3000" required>
<button type="submit">Open preview</button>
</form>`;
}

/**
 * The chat: the transcript fills from the agent's event stream (the one `svc sessions chat` follows) through a
 * small script; without it the forms still post and the page comes back.
 */
function chatSection(base: string, csrf: string): Html {
  return html`<section id="chat" aria-labelledby="chat-title" data-events="${base}/events" data-csrf="${csrf}">
<h2 id="chat-title">Chat with the agent <span class="muted" id="agent-state" role="status">connecting…</span></h2>
<ol id="transcript" aria-live="polite"></ol>
<form id="chat-form" method="post" action="${base}/messages">${csrfField(csrf)}
<label for="chat-text">Message</label>
<textarea id="chat-text" name="text" rows="3" required></textarea>
<button type="submit">Send</button>
</form>
<form id="abort-form" method="post" action="${base}/abort">${csrfField(csrf)}<button type="submit">Abort</button></form>
</section>
<script src="${SESSION_CHAT_SCRIPT_PATH}" defer></script>`;
}

export function sessionPage(view: SessionView, csrf: string): string {
  const { project, session: s } = view;
  const base = `/dashboard/projects/${project.id}/sessions/${s.session_id}`;
  return layout({
    title: `Session ${s.session_id.slice(0, 8)}`,
    csrf,
    body: html`<p><a href="/dashboard/projects/${project.id}">${project.name}</a></p>
<h1>Session <span class="mono">${s.session_id}</span></h1>
${view.refusal && html`<p class="notice error" role="alert">${view.refusal}</p>`}
<dl>
${row("Status", html`<span class="badge ${s.status}">${s.status}</span>${s.progress && html` <span class="muted">${s.progress}</span>`}`)}
${row("Branch", html`<span class="mono">${s.branch}</span>`)}
${row("Base", html`<span class="mono">${s.base_ref}</span>`)}
${row("Agent", `${s.agent_name}${s.agent_model ? ` (${s.agent_model})` : ""}`)}
${row("Trigger", s.trigger ?? "-")}
${row("Error", s.error ? html`<span class="error">${s.error}</span>` : "-")}
${row(
  "Change requests",
  view.changeRequests.length === 0
    ? "-"
    : html`${view.changeRequests.map(
        (cr) =>
          html`<a href="/dashboard/projects/${project.id}/crs/${cr.number}">#${cr.number} ${cr.title}</a> <span class="badge ${cr.status}">${cr.status}</span> `,
      )}`,
)}
</dl>
${lifecycle(base, s, csrf)}
${s.status === "running" && html`<h2>Preview</h2>${previewForm(base, csrf)}${chatSection(base, csrf)}`}`,
  });
}
