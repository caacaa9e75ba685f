import { type Html, html } from "../html.ts";
import { layout } from "../layout.ts";

/**
 * The end of a single sign-on: the session cookie is set, and this page goes on to `next` by itself. Not a redirect:
 * the browser came here from the provider's site, and a SameSite=Strict cookie stays home on every request of that
 * cross-site navigation, redirects included; a navigation this page starts is same-site, so the cookie goes along.
 */
export function ssoSignedInPage(next: string): string {
  return layout({
    title: "Signed in",
    goOnTo: next,
    body: html`<h1>Signed in</h1>
<p><a href="${next}">Continue to the dashboard</a></p>`,
  });
}

/**
 * "Sign in with SSO": a link, not a form, since the dashboard's CSP lets forms end on its own origin only and this
 * one goes on to the provider's. `next` is where the browser lands once signed in.
 */
export function ssoSection(next: string): Html {
  return html`<section aria-labelledby="with-sso">
<h2 id="with-sso">With your organization's account</h2>
<p><a href="/auth/oidc/start?next=${encodeURIComponent(next)}">Sign in with SSO</a></p>
</section>`;
}
