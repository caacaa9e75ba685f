import { type Html, html } from "./html.ts";

export const STYLESHEET_PATH = "/dashboard/assets/dashboard.css";

export type PageOptions = {
  title: string;
  body: Html;
  /** The signed-in browser's CSRF token: with it the header has the sign-out form. */
  csrf?: string;
  /** A path of this origin the page goes on to as soon as it loads (a meta refresh: no script, whatever the CSP). */
  goOnTo?: string;
};

/** A hidden field with the CSRF token: every state-changing form of the dashboard carries one. */
export const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;

/** The document around every dashboard page: title, navigation, sign-out; readable from 375 px wide. */
export function layout(options: PageOptions): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · svc</title>
${options.goOnTo && html`<meta http-equiv="refresh" content="0; url=${options.goOnTo}">`}
<link rel="stylesheet" href="${STYLESHEET_PATH}">
</head>
<body>
<header>
<nav aria-label="Main"><a href="/dashboard">svc</a>${options.csrf && html`<a href="/dashboard">Projects</a><a href="/dashboard/members">Members</a><a href="/dashboard/audit">Audit</a>`}</nav>
${
  options.csrf &&
  html`<form method="post" action="/dashboard/sign-out">${csrfField(options.csrf)}<button type="submit">Sign out</button></form>`
}
</header>
<main>
${options.body}
</main>
</body>
</html>
`.__html;
}
