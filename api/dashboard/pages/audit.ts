import type { Account } from "../../../protocol/account.ts";
import type { AuditEvent, AuditList } from "../../../protocol/audit.ts";
import { type Html, html } from "../html.ts";
import { layout } from "../layout.ts";

/** The names an entry keeps (secret names, a role, the merge queue), after its resource. */
function names(e: AuditEvent): string {
  const { names: listed, role, via } = e.details;
  return Array.isArray(listed) ? listed.join(", ") : String(role ?? via ?? "");
}

function eventRow(e: AuditEvent) {
  const how = e.actor.kind === "user" ? "" : ` (${e.actor.kind.replace("_", " ")})`;
  return html`<tr>
<td><time datetime="${e.at}">${e.at.slice(0, 19).replace("T", " ")}</time></td>
<td>${e.actor.email ?? e.actor.user_id}${how}</td>
<td class="mono">${e.action}</td>
<td>${e.resource.type} <span class="mono">${e.resource.id ?? ""}</span> ${names(e)}</td>
</tr>`;
}

/** `/dashboard/audit`: the account's audit log, newest first, a page at a time. */
/** `switcher`: the other accounts the person may look at (pages/account-switch.ts). */
export function auditPage(account: Account, list: AuditList, csrf: string, switcher?: Html): string {
  const body =
    list.events.length === 0
      ? html`<p>Nothing recorded yet: merges, closes, tokens, secrets, members and triggers changed appear here.</p>`
      : html`<section class="scroll"><table>
<thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Resource</th></tr></thead>
<tbody>${list.events.map(eventRow)}</tbody>
</table></section>
${list.next_before !== null && html`<p><a href="/dashboard/audit?before=${String(list.next_before)}">Older entries</a></p>`}`;
  return layout({
    title: `Audit log of ${account.name}`,
    csrf,
    body: html`<h1>Audit log of ${account.name}</h1>${switcher}${body}`,
  });
}
