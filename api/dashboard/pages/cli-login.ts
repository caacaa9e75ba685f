import { html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";

/** `svc login`'s page: a signed-in person hands the waiting CLI a token of their own, or does nothing. */
export function cliLoginPage(options: {
  host: string;
  email: string;
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
<p>A <code>svc login</code> waiting on this machine (port ${port}) asks for a token that acts as
<strong>${options.email}</strong> on every project of your accounts.</p>
<p>Authorize only if you just ran <code>svc login</code> yourself.</p>
<form method="post" action="/dashboard/cli/login">${csrfField(options.csrf)}
<input type="hidden" name="callback" value="${options.callback}">
<input type="hidden" name="state" value="${options.state}">
<button type="submit" class="primary">Authorize</button>
</form>
</section>`,
  });
}
