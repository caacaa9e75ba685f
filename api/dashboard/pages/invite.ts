import type { OpenInvite } from "../../people/invites.ts";
import type { UserState } from "../../people/password-sign-in.ts";
import { html } from "../html.ts";
import { csrfField, layout } from "../layout.ts";

export type InviteView = {
  /** The invite's path, where its forms post. */
  path: string;
  invite: OpenInvite;
  /** Whether its email has a user here already, and how they sign in. */
  user: UserState["kind"];
  /** The browser's own signed-in user, if any. */
  signedIn?: { email: string; csrf: string };
  refusal?: string;
  /** What the person typed as their name, kept when the page comes back with a refusal. */
  name?: string;
};

/** How the invite is taken up from here: by the signed-in addressee, by a new user, or by one with a password. */
function acceptForm(view: InviteView) {
  const { invite, signedIn } = view;
  if (signedIn?.email.toLowerCase() === invite.email)
    return html`<form method="post" action="${view.path}" class="fields">${csrfField(signedIn.csrf)}
<button type="submit" class="primary">Join ${invite.account}</button>
</form>`;
  if (view.user === "none")
    return html`<form method="post" action="${view.path}" class="fields">
<p>Choose the name others see and a password (at least 8 characters) for <strong>${invite.email}</strong>.</p>
<label for="invite-name">Display name</label>
<input id="invite-name" name="name" type="text" autocomplete="name" value="${view.name ?? ""}" required>
<label for="invite-password">Password</label>
<input id="invite-password" name="password" type="password" autocomplete="new-password" minlength="8" required>
<label for="invite-password-again">Password again</label>
<input id="invite-password-again" name="password_again" type="password" autocomplete="new-password" minlength="8" required>
<button type="submit" class="primary">Set password and join</button>
</form>`;
  if (view.user === "password")
    return html`<form method="post" action="${view.path}" class="fields">
<p><strong>${invite.email}</strong> has a user here already: sign in with its password to join.</p>
<input type="hidden" name="email" value="${invite.email}" autocomplete="username">
<label for="invite-password">Password</label>
<input id="invite-password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" class="primary">Sign in and join</button>
</form>`;
  // A user without a password is never given one by whoever holds the link: they sign in their own way first.
  return html`<p><strong>${invite.email}</strong> has a user here that signs in without a password. Sign in as that
user first (<code>svc projects open</code> prints a sign-in link), then open this invite again.</p>
<p><a href="/dashboard/sign-in?next=${encodeURIComponent(view.path)}">Sign in</a></p>`;
}

/** `/dashboard/invites/<token>`: whom the invite is for and where it leads, and the way to accept it. */
export function invitePage(view: InviteView): string {
  const { invite, signedIn } = view;
  const other = signedIn && signedIn.email.toLowerCase() !== invite.email;
  return layout({
    title: `Join ${invite.account}`,
    csrf: signedIn?.csrf,
    body: html`<h1>Join ${invite.account} on svc</h1>
${view.refusal && html`<p class="notice error" role="alert">${view.refusal}</p>`}
${other && html`<p class="notice info">This browser is signed in as ${signedIn.email}. Joining signs it in as ${invite.email} instead.</p>`}
<section>
<p>You are invited to the account <strong>${invite.account}</strong> as <strong>${invite.role}</strong>. This invite
is for <strong>${invite.email}</strong> only and works once, until ${invite.expiresAt.slice(0, 10)}.</p>
${acceptForm(view)}
</section>`,
  });
}
