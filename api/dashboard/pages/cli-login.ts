import { html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";

export type CliLoginView = { host: string; email: string; callback: string; state: string };

/** "Authorize svc CLI on <host>": one button that mints a user token and hands it to the CLI's loopback callback. */
export function cliLoginPage(view: CliLoginView, csrf: string): string {
  return layout({
    title: "Authorize svc CLI",
    csrf,
    body: html`<h1>Authorize svc CLI on ${view.host}</h1>
<p>The svc command-line client on this machine asks to act as <strong>${view.email}</strong>: it gets a token of
its own, which <code>svc logout</code> forgets. Authorize only if you just ran <code>svc login</code>.</p>
<form method="post" action="/dashboard/cli/login">${csrfField(csrf)}
<input type="hidden" name="callback" value="${view.callback}">
<input type="hidden" name="state" value="${view.state}">
<button type="submit">Authorize</button>
</form>
<p><a href="/dashboard">Cancel</a></p>`,
  });
}
