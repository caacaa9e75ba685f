import { html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";

/**
 * `svc login`'s page: a signed-in person hands the waiting CLI a token of their own, or does nothing. It names the
 * client, who the token acts as and where, and how long it lives, so a link someone else sent reads as what it is.
 */
export function cliLoginPage(options: {
  host: string;
  user: { email: string; name: string };
  /** Names of the user's accounts: the token reaches every project of each. */
  accounts: string[];
  days: number;
  callback: string;
  state: string;
  csrf: string;
}): string {
  const port = new URL(options.callback).port;
  return layout({
    title: "Authorize svc CLI",
    csrf: options.csrf,
    body: html`<h1>Authorize svc CLI on ${options.host}</h1>
<section>
<p>The svc command-line client waiting on this machine (<code>svc login</code>, port ${port}) asks for a token.</p>
<dl>
<dt>Acts as</dt><dd><strong>${options.user.email}</strong> (${options.user.name})</dd>
<dt>Account${options.accounts.length === 1 ? "" : "s"}</dt><dd>${options.accounts.join(", ")}: every project</dd>
<dt>Expires</dt><dd>in ${options.days} days (<code>svc tokens revoke</code> ends it sooner)</dd>
</dl>
<p>Authorize only if you just ran <code>svc login</code> yourself.</p>
<form method="post" action="/dashboard/cli/login">${csrfField(options.csrf)}
<input type="hidden" name="callback" value="${options.callback}">
<input type="hidden" name="state" value="${options.state}">
<button type="submit" class="primary">Authorize</button>
</form>
</section>`,
  });
}
