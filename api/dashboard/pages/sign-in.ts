import { html } from "../html.ts";
import { layout } from "../layout.ts";
import { HOW_TO_SIGN_IN } from "./messages.ts";
import { ssoSection } from "./sso.ts";

/**
 * Where a browser without a session lands: email and password, or a one-time link from the command line. `next`
 * (a dashboard path) is where a sign-in goes on to; `refusal` says why the last try did not sign in.
 */
export function signInPage(options: {
  next: string;
  signedOut?: boolean;
  email?: string;
  refusal?: string;
  /** Single sign-on is configured: the page offers it first. */
  sso?: boolean;
}): string {
  return layout({
    title: "Sign in",
    body: html`<h1>Sign in to the svc dashboard</h1>
${options.signedOut && html`<p class="notice info" role="status">You are signed out.</p>`}
${options.refusal && html`<p class="notice error" role="alert">${options.refusal}</p>`}
${options.sso && ssoSection(options.next)}
<section aria-labelledby="with-password">
<h2 id="with-password">With your email and password</h2>
<form method="post" action="/dashboard/sign-in/password" class="fields">
<input type="hidden" name="next" value="${options.next}">
<label for="sign-in-email">Email</label>
<input id="sign-in-email" name="email" type="email" autocomplete="username" value="${options.email ?? ""}" required>
<label for="sign-in-password">Password</label>
<input id="sign-in-password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" class="primary">Sign in</button>
</form>
</section>
<section aria-labelledby="with-link">
<h2 id="with-link">With a link from the command line</h2>
${HOW_TO_SIGN_IN}
</section>`,
  });
}
