import { type Html, html } from "../html.ts";
import { layout } from "../layout.ts";

/** How to get a one-time sign-in link: the sign-in page and a spent link's page say it. */
export const HOW_TO_SIGN_IN = html`<p>The dashboard signs a browser in with a one-time link from the command line. Run</p>
<pre><code>svc projects open</code></pre>
<p>(or <code>svc projects open &lt;id&gt;</code>, <code>svc sessions open &lt;id&gt;</code>) on a machine logged in
to this server, and open the link it prints within two minutes. On the machine that runs <code>svc self-host</code>,
<code>svc self-host start</code> has logged its CLI in as the admin.</p>`;

/**
 * What a sign-in link opens: the question, not the session. Signing in takes this page's Continue (a POST of the
 * code), so a link someone else planted in a page or a mail never signs a browser in to their account unasked.
 */
export function signInConfirmPage(options: {
  email: string;
  account: string;
  /** How long the browser session lasts. */
  days: number;
  code: string;
  next: string;
}): string {
  return layout({
    title: "Sign in",
    body: html`<h1>Sign in as ${options.email} to ${options.account}?</h1>
<section>
<p>This browser will be signed in to the svc dashboard as <strong>${options.email}</strong> (account
${options.account}) for ${options.days} days, and then go to <code>${options.next}</code>.</p>
<p>Continue only if you opened a link that you asked for yourself (<code>svc projects open</code>,
<code>svc sessions open</code>).</p>
<form method="post" action="/dashboard/sign-in">
<input type="hidden" name="code" value="${options.code}">
<input type="hidden" name="next" value="${options.next}">
<button type="submit" class="primary">Continue</button>
</form>
</section>`,
  });
}

/** A sign-in link used twice, expired or mangled. */
export function badSignInLinkPage(): string {
  return layout({
    title: "Sign-in link not valid",
    body: html`<h1>This sign-in link is not valid</h1>
<p class="notice error" role="alert">It has expired or was already used: a sign-in link works once, for two minutes.</p>
${HOW_TO_SIGN_IN}`,
  });
}

/** Any refusal or failure of a dashboard page, in words. */
export function errorPage(title: string, message: string, csrf?: string, extra?: Html): string {
  return layout({
    title,
    csrf,
    body: html`<h1>${title}</h1><p class="notice error" role="alert">${message}</p>${extra}<p><a href="/dashboard">Back to your projects</a></p>`,
  });
}
