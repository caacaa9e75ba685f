import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AccountRole } from "../../protocol/account.ts";

/**
 * Who may call a route:
 * - a role: at least that role in the account the route acts on: the project's (`:projectId`; a project token
 *   holds the role of the person it was minted for), else the account the request names or the caller's first;
 * - "signed-in": any login the route's auth policy admits; it acts on the caller's own things only (their
 *   profile, their tokens, the projects of their accounts);
 * - "anyone": no login; the route checks a credential of its own (git's, Slack's signature, a sign-in code) or
 *   serves what everyone may see;
 * - "installation-admin": the self-hosted installation's administrator (users.is_admin), whatever their roles.
 */
export type Access = AccountRole | "signed-in" | "anyone" | "installation-admin";

/**
 * The one table of who may do what (DESIGN, Teams: viewer reads; member also runs sessions, opens, comments on
 * and merges CRs; admin also secrets, members, triggers; owner also the account itself). One line per route the
 * API and the dashboard register, `METHOD /pattern` as Fastify has it (HEAD goes by its GET), and one per act
 * that reaches no route of Fastify's: git's fetch and push on the git endpoint, exec's upgrade, preview and app
 * hosts. A route without a line stops the API at start (requireRouteRoles): nobody adds one without deciding.
 */
export const ROUTE_ROLES = {
  // Anyone: health, the CLI's installer, Slack's signed events, the sign-in pages and the dashboard's assets.
  "GET /v1/health": "anyone",
  "GET /install.sh": "anyone",
  "GET /v1/cli/svc.mjs": "anyone",
  "POST /v1/channels/slack/events": "anyone",
  "GET /dashboard/sign-in": "anyone",
  "POST /dashboard/sign-in": "anyone",
  // A password is its own credential (rate-limited per email and address); an invite's link is too.
  "POST /dashboard/sign-in/password": "anyone",
  "GET /dashboard/invites/:token": "anyone",
  "POST /dashboard/invites/:token": "anyone",
  "GET /dashboard/assets/dashboard.css": "anyone",
  "GET /dashboard/assets/session-chat.js": "anyone",
  "GET /dashboard/assets/cr-checks.js": "anyone",
  "POST /v1/auth/password": "anyone",
  "GET /auth/oidc/start": "anyone",
  "GET /auth/oidc/callback": "anyone",

  // Git authenticates with its own Basic credential; what it may do then is the two lines after.
  "GET /git/:repo/*": "anyone",
  "POST /git/:repo/*": "anyone",
  "FETCH /git/:repo.git": "viewer",
  "PUSH /git/:repo.git": "member",

  // The caller's own: their profile, tokens and a dashboard sign-in of their own browser.
  "GET /v1/accounts/me": "signed-in",
  "GET /v1/accounts/tokens": "signed-in",
  "POST /v1/accounts/tokens": "signed-in",
  "DELETE /v1/accounts/tokens/:tokenId": "signed-in",
  "POST /v1/dashboard/sign-in-links": "signed-in",
  "GET /dashboard": "signed-in",
  "GET /dashboard/cli/login": "signed-in",
  "POST /dashboard/cli/login": "signed-in",
  "POST /dashboard/sign-out": "signed-in",
  "POST /dashboard/account": "signed-in",
  // Lists only the projects of the caller's accounts.
  "GET /v1/projects": "signed-in",

  // The account's members: who they are is for everyone in it; inviting, changing roles and removing an admin's.
  "GET /v1/accounts/members": "viewer",
  "POST /v1/accounts/members/invites": "admin",
  "PATCH /v1/accounts/members/:email": "admin",
  "DELETE /v1/accounts/members/:email": "admin",
  "GET /dashboard/members": "viewer",
  "POST /dashboard/members/invites": "admin",
  "POST /dashboard/members/role": "admin",
  "POST /dashboard/members/remove": "admin",
  // The account's plan, cap and usage are for everyone in it; its audit log (who changed what) for its admins.
  "GET /v1/accounts/plan": "viewer",
  "GET /v1/accounts/usage": "viewer",
  "GET /v1/accounts/audit": "admin",
  "GET /dashboard/audit": "admin",

  "GET /v1/admin/installation": "installation-admin",
  "GET /v1/admin/backup/database": "installation-admin",
  "GET /v1/admin/backup/repositories": "installation-admin",
  "GET /v1/admin/backup/repositories/:projectId/bundle": "installation-admin",
  "POST /v1/admin/sessions/stop": "installation-admin",
  "PUT /v1/admin/accounts/:account/plan": "installation-admin",

  // Projects. A person's project token acts as them with their role, so minting one needs no more than reading.
  "POST /v1/projects": "admin",
  "GET /v1/projects/:projectId": "viewer",
  "POST /v1/projects/:projectId/cli-token": "viewer",
  // A clone credential, like a token, carries its person's role: fetch and push are checked when it is used.
  "GET /v1/projects/:projectId/git/clone-credential": "viewer",
  "GET /dashboard/projects/:projectId": "viewer",

  // Change requests.
  "GET /v1/projects/:projectId/change-requests": "viewer",
  "GET /v1/projects/:projectId/change-requests/:crId": "viewer",
  "GET /v1/projects/:projectId/change-requests/:crId/diff": "viewer",
  "GET /v1/projects/:projectId/change-requests/:crId/merge-preview": "viewer",
  "GET /v1/projects/:projectId/change-requests/:crId/checks": "viewer",
  "GET /v1/projects/:projectId/change-requests/:crId/comments": "viewer",
  "GET /v1/projects/:projectId/change-requests/:crId/approvals": "viewer",
  "POST /v1/projects/:projectId/change-requests": "member",
  "PATCH /v1/projects/:projectId/change-requests/:crId": "member",
  "POST /v1/projects/:projectId/change-requests/:crId/merge": "member",
  "POST /v1/projects/:projectId/change-requests/:crId/close": "member",
  "POST /v1/projects/:projectId/change-requests/:crId/reopen": "member",
  "POST /v1/projects/:projectId/change-requests/:crId/comments": "member",
  "POST /v1/projects/:projectId/change-requests/:crId/resolve": "member",
  "POST /v1/projects/:projectId/change-requests/:crId/approve": "member",
  "GET /dashboard/projects/:projectId/crs/:crId": "viewer",
  "GET /dashboard/projects/:projectId/crs/:crId/checks": "viewer",
  "POST /dashboard/projects/:projectId/crs/:crId/merge": "member",
  "POST /dashboard/projects/:projectId/crs/:crId/close": "member",
  "POST /dashboard/projects/:projectId/crs/:crId/reopen": "member",
  "POST /dashboard/projects/:projectId/crs/:crId/comments": "member",
  "POST /dashboard/projects/:projectId/crs/:crId/resolve": "member",
  "POST /dashboard/projects/:projectId/crs/:crId/auto-merge": "member",
  "POST /dashboard/projects/:projectId/crs/:crId/approve": "member",

  // Sessions: reading them (transcript, events, logs) is a viewer's; running, prompting or reaching into their
  // sandboxes (exec, previews: a sandbox holds the project's secrets) a member's.
  "GET /v1/sessions/:sessionId": "viewer",
  "GET /v1/projects/:projectId/sessions": "viewer",
  "GET /v1/projects/:projectId/sessions/:sessionId": "viewer",
  "GET /v1/projects/:projectId/sessions/:sessionId/transcript": "viewer",
  "GET /v1/projects/:projectId/sessions/:sessionId/events": "viewer",
  "GET /v1/projects/:projectId/sessions/:sessionId/logs": "viewer",
  "POST /v1/projects/:projectId/sessions": "member",
  "DELETE /v1/projects/:projectId/sessions/:sessionId": "member",
  "POST /v1/projects/:projectId/sessions/:sessionId/stop": "member",
  "POST /v1/projects/:projectId/sessions/:sessionId/restart": "member",
  "POST /v1/projects/:projectId/sessions/:sessionId/messages": "member",
  "POST /v1/projects/:projectId/sessions/:sessionId/abort": "member",
  "POST /v1/projects/:projectId/sessions/:sessionId/previews": "member",
  "EXEC /v1/projects/:projectId/sessions/:sessionId/exec": "member",
  "PREVIEW <port>-<session>.<preview domain>": "member",
  "GET /dashboard/projects/:projectId/sessions/:sessionId": "viewer",
  "GET /dashboard/projects/:projectId/sessions/:sessionId/transcript": "viewer",
  "GET /dashboard/projects/:projectId/sessions/:sessionId/events": "viewer",
  "POST /dashboard/projects/:projectId/sessions": "member",
  "POST /dashboard/projects/:projectId/sessions/:sessionId/messages": "member",
  "POST /dashboard/projects/:projectId/sessions/:sessionId/abort": "member",
  "POST /dashboard/projects/:projectId/sessions/:sessionId/stop": "member",
  "POST /dashboard/projects/:projectId/sessions/:sessionId/restart": "member",
  "POST /dashboard/projects/:projectId/sessions/:sessionId/preview": "member",

  // Secrets: names are listed to viewers (values never leave the API); setting and unsetting is an admin's.
  "GET /v1/projects/:projectId/secrets": "viewer",
  "PUT /v1/projects/:projectId/secrets": "admin",
  "DELETE /v1/projects/:projectId/secrets": "admin",

  // Triggers: firing one starts a session as the project's acting person; enabling one opens a CR on svc.toml.
  "GET /v1/projects/:projectId/triggers": "viewer",
  "GET /v1/projects/:projectId/triggers/:slug": "viewer",
  "POST /v1/projects/:projectId/triggers/:slug/fire": "admin",
  "POST /v1/projects/:projectId/triggers/:slug/enable": "admin",
  "POST /v1/projects/:projectId/triggers/:slug/disable": "admin",
  "POST /dashboard/projects/:projectId/triggers/:slug/fire": "admin",

  // Channels start sessions as the person who connected them.
  "GET /v1/projects/:projectId/channels": "viewer",
  "POST /v1/projects/:projectId/channels": "admin",
  "DELETE /v1/projects/:projectId/channels/:channelRef": "admin",

  // Apps: a deployed app is for looking at; redeploying or rolling one back is an admin's.
  "GET /v1/projects/:projectId/apps": "viewer",
  "GET /v1/projects/:projectId/apps/:name": "viewer",
  "GET /v1/projects/:projectId/apps/:name/deploys": "viewer",
  "GET /v1/projects/:projectId/apps/:name/logs": "viewer",
  "POST /v1/projects/:projectId/apps/:name/link": "viewer",
  "APP <app>--<project>.<preview domain>": "viewer",
  "POST /v1/projects/:projectId/apps/:name/redeploy": "admin",
  "POST /v1/projects/:projectId/apps/:name/rollback": "admin",
} as const satisfies Record<string, Access>;

export type RouteKey = keyof typeof ROUTE_ROLES;

export const isRole = (access: Access | undefined): access is AccountRole =>
  access !== undefined && access !== "signed-in" && access !== "anyone" && access !== "installation-admin";

/** A table line's role, for the acts that are no route (git, exec, preview and app hosts). */
export function leastRole(key: RouteKey): AccountRole {
  const access: Access = ROUTE_ROLES[key];
  if (!isRole(access)) throw new Error(`${key} takes no account role`);
  return access;
}

function accessOf(method: string, url: string): Access | undefined {
  // A prefix's root is registered twice, `/dashboard` and `/dashboard/` (the latter's HEAD only shows here).
  const key = `${method === "HEAD" ? "GET" : method} ${url.length > 1 ? url.replace(/\/$/, "") : url}`;
  return Object.hasOwn(ROUTE_ROLES, key) ? ROUTE_ROLES[key as RouteKey] : undefined;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route's line of ROUTE_ROLES, put there as it registers. */
    access?: Access;
  }
}

/**
 * Refuses, as it registers, a route that has no line in ROUTE_ROLES (a route registered for several methods
 * needs one per method): the API does not start with a route whose access nobody decided.
 */
export function requireRouteRoles(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const found = methods.map((method) => accessOf(method, route.url));
    const missing = methods.filter((_, i) => found[i] === undefined);
    if (missing.length > 0)
      throw new Error(
        `route ${missing.join(",")} ${route.url} has no line in ROUTE_ROLES (api/auth/route-roles.ts): say who may call it`,
      );
    // One route, several methods (git's GET and POST): their lines must agree, as the route has one config.
    if (new Set(found).size > 1) throw new Error(`route ${route.url}: its methods have different lines in ROUTE_ROLES`);
    route.config = { ...route.config, access: found[0] };
  });
}

/** The least role of the route serving `req`; a programming error on a route whose line is not a role. */
export function routeRole(req: FastifyRequest): AccountRole {
  const access = req.routeOptions.config.access;
  if (!isRole(access))
    throw new Error(`route ${req.routeOptions.method} ${req.routeOptions.url} takes no account role`);
  return access;
}
