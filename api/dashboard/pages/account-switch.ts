import type { Account } from "../../../protocol/account.ts";
import { type Html, html } from "../html.ts";
import { csrfField } from "../layout.ts";

/**
 * For a person in several accounts: which one an account page shows, and a form to look at another (the choice is
 * the browser's, as `svc accounts use` is the CLI's). Nothing for a person in one account.
 */
export function accountSwitch(current: Account, mine: readonly Account[], csrf: string, next: string): Html {
  const others = mine.filter((a) => a.id !== current.id);
  if (others.length === 0) return html``;
  return html`<form method="post" action="/dashboard/account" class="inline account-switch">${csrfField(csrf)}
<input type="hidden" name="next" value="${next}">
<label>Account <select name="account">
<option value="${current.slug}" selected>${current.name}</option>
${others.map((a) => html`<option value="${a.slug}">${a.name}</option>`)}
</select></label> <button type="submit">Switch</button></form>`;
}
