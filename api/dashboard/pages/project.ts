import type { AccountRole } from "../../../protocol/account.ts";
import type { AppList } from "../../../protocol/app.ts";
import type { ChangeRequest } from "../../../protocol/change-request.ts";
import type { Project } from "../../../protocol/project.ts";
import type { SecretList } from "../../../protocol/secret.ts";
import type { Session } from "../../../protocol/session.ts";
import type { TriggerList } from "../../../protocol/trigger.ts";
import { atLeast } from "../../auth/roles.ts";
import { leastRole, type RouteKey } from "../../auth/route-roles.ts";
import { type Html, html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";
import type { Part } from "../part.ts";

export type ProjectView = {
  project: Project;
  /** The person's role in the project's account: a control their role may not use is not shown. */
  role: AccountRole;
  sessions: Part<Session[]>;
  changeRequests: ChangeRequest[];
  secrets: Part<SecretList>;
  triggers: Part<TriggerList>;
  apps: Part<AppList>;
  /** Why the last action was refused (the session cap, a trigger that cannot fire), in words. */
  refusal?: string;
};

/** Whether the page's person may post to `key` (the server checks again, with the same table). */
const may = (view: ProjectView, key: RouteKey) => atLeast(view.role, leastRole(key));

/** A new session, as `svc sessions new [--prompt] [--base]` starts one. */
function newSessionForm(view: ProjectView, csrf: string): Html {
  return html`<form method="post" action="/dashboard/projects/${view.project.id}/sessions">${csrfField(csrf)}
<label for="new-prompt">Prompt (optional)</label>
<textarea id="new-prompt" name="prompt" rows="3"></textarea>
<label for="new-base">Base branch</label>
<input id="new-base" name="base_ref" value="${view.project.default_branch}" required>
<button type="submit">New session</button>
</form>`;
}

function appsSection(view: ProjectView): Html {
  return part(view.apps, (list) =>
    list.apps.length === 0
      ? html`<p class="muted">No apps in svc.toml.</p>`
      : html`<div class="scroll"><table>
<thead><tr><th scope="col">App</th><th scope="col">Status</th><th scope="col">Revision</th><th scope="col">Last deploy</th></tr></thead>
<tbody>${list.apps.map(
          (a) => html`<tr>
<td class="mono">${a.url ? html`<a href="${a.url}">${a.name}</a>` : a.name}</td>
<td><span class="badge ${a.status}">${a.status}</span></td>
<td class="mono">${a.live_revision?.slice(0, 7) ?? "-"}</td>
<td>${a.last_deploy ? html`${a.last_deploy.status}${a.last_deploy.error && html` <span class="muted">${a.last_deploy.error.split("\n")[0]}</span>`}` : "-"}</td>
</tr>`,
        )}</tbody></table></div>`,
  );
}

const when = (iso: string | null) =>
  iso ? html`<time datetime="${iso}">${iso.replace("T", " ").slice(0, 16)}</time>` : "-";

function part<T>(p: Part<T>, render: (value: T) => Html): Html {
  return p.ok ? render(p.value) : html`<p class="muted">${p.reason}</p>`;
}

function sessionsSection(view: ProjectView): Html {
  return part(view.sessions, (sessions) =>
    sessions.length === 0
      ? html`<p class="muted">No sessions yet: <code>svc sessions new</code>.</p>`
      : html`<div class="scroll"><table>
<thead><tr><th scope="col">Session</th><th scope="col">Status</th><th scope="col">Trigger</th><th scope="col">Agent</th><th scope="col">Created</th></tr></thead>
<tbody>${sessions.map(
          (s) => html`<tr>
<td class="mono"><a href="/dashboard/projects/${view.project.id}/sessions/${s.session_id}">${s.session_id.slice(0, 8)}</a></td>
<td><span class="badge ${s.status}">${s.status}</span>${s.error && html` <span class="muted">${s.error}</span>`}</td>
<td>${s.trigger ?? "-"}</td>
<td>${s.agent_name}</td>
<td>${when(s.created_at)}</td>
</tr>`,
        )}</tbody></table></div>`,
  );
}

function crSection(view: ProjectView): Html {
  const groups = (["open", "merged", "closed"] as const).map((status) => {
    const crs = view.changeRequests.filter((cr) => cr.status === status);
    return html`<h3>${status[0]!.toUpperCase()}${status.slice(1)} (${crs.length})</h3>
${
  crs.length === 0
    ? html`<p class="muted">None.</p>`
    : html`<ul>${crs.map(
        (cr) =>
          html`<li><a href="/dashboard/projects/${view.project.id}/crs/${cr.number}">#${cr.number} ${cr.title}</a> <span class="muted mono">${cr.head_ref} → ${cr.base_ref}</span></li>`,
      )}</ul>`
}`;
  });
  return html`${groups}`;
}

function secretsSection(view: ProjectView): Html {
  return part(view.secrets, (list) => {
    const names = new Set(list.secrets.map((s) => s.name));
    const all = [...new Set([...names, ...Object.keys(list.env)])].sort();
    if (all.length === 0) return html`<p class="muted">No secrets, and the manifest expects none.</p>`;
    return html`<ul>${all.map((name) => {
      const expected = list.env[name];
      const missing = expected?.required && !names.has(name);
      return html`<li><code>${name}</code>${missing && html` <span class="badge missing">required, missing</span>`}${
        !missing && expected?.required && html` <span class="muted">required</span>`
      }${expected?.description && html` <span class="muted">${expected.description}</span>`}</li>`;
    })}</ul>${list.manifest_error && html`<p class="notice error">svc.toml: ${list.manifest_error.message}</p>`}`;
  });
}

function triggersSection(view: ProjectView, csrf: string): Html {
  return part(view.triggers, (list) =>
    list.triggers.length === 0
      ? html`<p class="muted">No triggers in svc.toml.</p>`
      : html`<div class="scroll"><table>
<thead><tr><th scope="col">Trigger</th><th scope="col">Schedule</th><th scope="col">Enabled</th><th scope="col">Last fired</th><th scope="col"></th></tr></thead>
<tbody>${list.triggers.map(
          (t) => html`<tr>
<td class="mono">${t.slug}</td>
<td class="mono">${t.schedule}${t.timezone && html` (${t.timezone})`}</td>
<td>${t.enabled ? "yes" : "no"}</td>
<td>${when(t.last_fired_at)}${t.last_error && html` <span class="badge failed">${t.last_error}</span>`}</td>
<td>${
            may(view, "POST /dashboard/projects/:projectId/triggers/:slug/fire") &&
            html`<form method="post" action="/dashboard/projects/${view.project.id}/triggers/${t.slug}/fire" class="inline">${csrfField(csrf)}<button type="submit" aria-label="Fire ${t.slug}">Fire</button></form>`
          }</td>
</tr>`,
        )}</tbody></table></div>`,
  );
}

/** `/dashboard/projects/{id}`: sessions (and a new one), CRs by status, secret names, triggers (fired from here), apps. */
export function projectPage(view: ProjectView, csrf: string): string {
  const p = view.project;
  return layout({
    title: p.name,
    csrf,
    body: html`<h1>${p.name} <span class="muted mono">${p.slug}</span></h1>
<p class="muted">${p.repo_kind} repository, default branch <code>${p.default_branch}</code></p>
${view.refusal && html`<p class="notice error" role="alert">${view.refusal}</p>`}
<section aria-labelledby="sessions"><h2 id="sessions">Sessions</h2>${may(view, "POST /dashboard/projects/:projectId/sessions") && newSessionForm(view, csrf)}${sessionsSection(view)}</section>
<section aria-labelledby="crs"><h2 id="crs">Change requests</h2>${crSection(view)}</section>
<section aria-labelledby="secrets"><h2 id="secrets">Secrets</h2>${secretsSection(view)}</section>
<section aria-labelledby="triggers"><h2 id="triggers">Triggers</h2>${triggersSection(view, csrf)}</section>
<section aria-labelledby="apps"><h2 id="apps">Apps</h2>${appsSection(view)}</section>`,
  });
}
