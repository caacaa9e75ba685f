import { type Account, AccountRole } from "../../../protocol/account.ts";
import type { Invite, Member } from "../../../protocol/member.ts";
import { atLeast } from "../../auth/roles.ts";
import { type Html, html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";

export type MembersView = {
  /** The account, with the signed-in person's role in it. */
  account: Account;
  members: Member[];
  /** An invite just made: its link is shown this once. */
  invited?: Invite;
  refusal?: string;
  /** The other accounts the person may look at (pages/account-switch.ts). */
  switcher?: Html;
};

/** The roles the person may hand out: an admin every one but owner, an owner all. */
const assignable = (actor: Account["role"]) => AccountRole.options.filter((r) => r !== "owner" || actor === "owner");

const roleOptions = (roles: readonly string[], selected: string) =>
  roles.map((r) => html`<option value="${r}"${r === selected ? html` selected` : ""}>${r}</option>`);

function memberRow(member: Member, account: Account, csrf: string) {
  // An admin changes no owner's membership; the server refuses it anyway (FORBIDDEN_ROLE).
  const manages = atLeast(account.role, "admin") && (member.role !== "owner" || account.role === "owner");
  const controls =
    manages &&
    html`<td><div class="buttons">
<form method="post" action="/dashboard/members/role" class="inline">${csrfField(csrf)}
<input type="hidden" name="email" value="${member.email}">
<select name="role" aria-label="Role of ${member.email}">${roleOptions(assignable(account.role), member.role)}</select>
<button type="submit" aria-label="Change role of ${member.email}">Change role</button>
</form>
<form method="post" action="/dashboard/members/remove" class="inline">${csrfField(csrf)}
<input type="hidden" name="email" value="${member.email}">
<button type="submit" aria-label="Remove ${member.email}">Remove</button>
</form>
</div></td>`;
  return html`<tr>
<td>${member.email}</td>
<td>${member.name}</td>
<td><span class="badge">${member.role}</span></td>
<td><time datetime="${member.joined}">${member.joined.slice(0, 10)}</time></td>
${controls || (atLeast(account.role, "admin") && html`<td></td>`)}
</tr>`;
}

function inviteForm(account: Account, csrf: string) {
  return html`<form method="post" action="/dashboard/members/invites" class="fields">${csrfField(csrf)}
<label for="invite-email">Email</label>
<input id="invite-email" name="email" type="email" required>
<label for="invite-role">Role</label>
<select id="invite-role" name="role">${roleOptions(assignable(account.role), "member")}</select>
<button type="submit" class="primary">Invite</button>
</form>`;
}

/** `/dashboard/members`: who is in the account; an admin's page also invites, changes roles and removes. */
export function membersPage(view: MembersView, csrf: string): string {
  const { account, invited } = view;
  const admin = atLeast(account.role, "admin");
  return layout({
    title: "Members",
    csrf,
    body: html`<h1>Members of ${account.name}</h1>${view.switcher}
${view.refusal && html`<p class="notice error" role="alert">${view.refusal}</p>`}
${
  invited &&
  html`<div class="notice info" role="status"><p>Invited ${invited.email} as ${invited.role}. Send them this link: it
works once, until ${invited.expires_at.slice(0, 10)}, and is not shown again.</p>
<p><code id="invite-url">${invited.url}</code></p></div>`
}
<section class="scroll"><table>
<thead><tr><th scope="col">Email</th><th scope="col">Name</th><th scope="col">Role</th><th scope="col">Joined</th>${admin && html`<th scope="col">Change</th>`}</tr></thead>
<tbody>${view.members.map((m) => memberRow(m, account, csrf))}</tbody>
</table></section>
${admin && html`<section aria-labelledby="invite"><h2 id="invite">Invite someone</h2>${inviteForm(account, csrf)}</section>`}`,
  });
}
