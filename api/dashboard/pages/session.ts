import type { ChangeRequest } from "../../../protocol/change-request.ts";
import type { Project } from "../../../protocol/project.ts";
import type { Session } from "../../../protocol/session.ts";
import { plainText } from "../../../protocol/terminal-text.ts";
import type { TranscriptEntry, TranscriptTool } from "../../../protocol/transcript.ts";
import { type Html, html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";
import { markdown } from "../markdown.ts";

export const SESSION_CHAT_SCRIPT_PATH = "/dashboard/assets/session-chat.js";

export type SessionView = {
  project: Project;
  session: Session;
  /** The CRs this session's agent opened (their origin session), newest first. */
  changeRequests: ChangeRequest[];
  /** The session's stored conversation, oldest first. */
  transcript: TranscriptEntry[];
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

/** A tool's input in a summary line is cut past this many characters (the whole input is in its body). */
const INPUT_CHARS = 200;

/** What a tool was asked, as a person reads it: a shell tool's command, else its input as JSON. */
function toolInput(tool: TranscriptTool): { line: string; whole: string } {
  const command = tool.input.command;
  const whole = plainText(typeof command === "string" ? command : JSON.stringify(tool.input)).trim();
  const line = whole.replace(/\s*\n\s*/g, " ⏎ ");
  return { line: line.length > INPUT_CHARS ? `${line.slice(0, INPUT_CHARS)}…` : line, whole };
}

/** HH:MM:SS UTC: the page's script shows it in the browser's time zone. */
const time = (at: string) => html`<time datetime="${at}" title="${at}">${at.slice(11, 19)}</time>`;

function toolBody(tool: TranscriptTool): Html {
  const input = toolInput(tool);
  const output = tool.output === null ? null : plainText(tool.output);
  return html`${input.line !== input.whole && html`<pre class="tool-input-whole">${input.whole}</pre>`}
${
  output
    ? html`<pre class="tool-output">${output}</pre>`
    : html`<p class="muted">${tool.status === "running" ? "No output yet." : "No output."}</p>`
}
${tool.output_truncated && html`<p class="muted">Output cut at 64 KiB.</p>`}`;
}

/**
 * One entry of the transcript, the same markup on the page and in its live updates (`data-seq` orders entries,
 * a grown `data-rev` replaces one): the person's and the agent's words as Markdown, a tool call folded into its
 * name, status and input, its output as plain text.
 */
export function transcriptItem(entry: TranscriptEntry): Html {
  const attrs = html`id="entry-${entry.seq}" data-seq="${entry.seq}" data-rev="${entry.rev}"`;
  if (entry.role === "tool") {
    const tool = entry.tool;
    return html`<li class="entry tool" ${attrs}><details>
<summary><span class="who">tool</span> <span class="tool-name">${tool?.name ?? "?"}</span>${
      tool &&
      html` <span class="badge ${tool.status}">${tool.status}</span> <code class="tool-input">${toolInput(tool).line}</code>`
    } ${time(entry.at)}</summary>
${tool ? toolBody(tool) : markdown(entry.text)}
</details></li>`;
  }
  return html`<li class="entry ${entry.role}" ${attrs}>
<p class="entry-head"><span class="who">${entry.role === "user" ? "you" : "agent"}</span> ${time(entry.at)}</p>
<div class="markdown">${markdown(entry.text)}</div>
</li>`;
}

/**
 * The transcript as stored, whatever the session's state; while it runs, the chat with its agent. A small script
 * keeps the transcript current (polling `transcript`) and shows the agent's state (from `events`, the stream
 * `svc sessions chat` follows); without it the forms still post and the page comes back.
 */
function chatSection(base: string, view: SessionView, csrf: string): Html {
  const running = view.session.status === "running";
  const lastRev = view.transcript.reduce((max, e) => Math.max(max, e.rev), 0);
  return html`<section id="chat" aria-labelledby="chat-title" data-transcript="${base}/transcript"${
    running && html` data-events="${base}/events"`
  } data-csrf="${csrf}">
<h2 id="chat-title">${running ? "Chat with the agent" : "Transcript"}${
    running && html` <span class="muted" id="agent-state" role="status">connecting…</span>`
  }</h2>
<ol id="transcript" aria-live="polite" data-rev="${lastRev}">
${view.transcript.map(transcriptItem)}
</ol>
${view.transcript.length === 0 && html`<p class="muted" id="transcript-empty">Nothing said yet.</p>`}
<p class="notice error" id="chat-error" role="alert" hidden></p>
${
  running &&
  html`<form id="chat-form" method="post" action="${base}/messages">${csrfField(csrf)}
<label for="chat-text">Message</label>
<textarea id="chat-text" name="text" rows="3" required></textarea>
<button type="submit">Send</button>
</form>
<form id="abort-form" method="post" action="${base}/abort">${csrfField(csrf)}<button type="submit">Abort</button></form>`
}
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
${s.status === "running" && html`<h2>Preview</h2>${previewForm(base, csrf)}`}
${chatSection(base, view, csrf)}`,
  });
}
