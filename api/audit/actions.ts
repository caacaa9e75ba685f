import { z } from "zod";
import { AccountRole } from "../../protocol/account.ts";
import { Email } from "../../protocol/member.ts";

type Body = Record<string, unknown>;

/**
 * The account an entry goes to: the project's (`:projectId`), the one the account route acted on, or every account
 * of the acting person (a user token reaches them all).
 */
export type AuditScope = "project" | "account" | "user";

export type AuditRule = {
  /** `<resource>.<verb>`; a function when a flag of the request says which act it was (auto-merge on or off). */
  action: string | ((body: Body) => string);
  resource: string;
  scope: AuditScope;
  /**
   * The resource's id: a path parameter's value, the `id` of what the answer created, or a body field that is an
   * identifier by its schema (an invitee's email). Never any other value of a request or an answer.
   */
  id?: { param: string } | { created: true } | { body: "email" };
  /** Names the entry keeps from the body (secret names, a role's name); never a value. */
  names?: (body: Body) => Record<string, string | string[]>;
};

/** The fields a request set, by name: its body's keys, without the dashboard's `_csrf`. */
export const fieldNames = (body: Body): string[] =>
  Object.keys(body)
    .filter((k) => !k.startsWith("_"))
    .sort();

/** A secret's name as the environment has them; unset takes names the set route never would (older ones). */
const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,199}$/);

/** Only what has a name's shape: anything else is left out rather than stored. */
const namesOf = (values: unknown): string[] =>
  (Array.isArray(values) ? values : []).filter((v): v is string => EnvName.safeParse(v).success).sort();
const role = (body: Body): Record<string, string> =>
  AccountRole.safeParse(body.role).success ? { role: body.role as string } : {};

/**
 * The merge route's act: the merge itself, or (`auto`) the CR put into the merge queue (202) or taken out of it; the
 * queue's merge, later, is an entry of its own (api/audit/queue-merges.ts).
 */
function mergeAction(body: Body): string {
  if (body.auto === undefined) return "cr.merge";
  return body.auto === true ? "cr.auto_merge.on" : "cr.auto_merge.off";
}

const cr = (action: AuditRule["action"]): AuditRule => ({
  action,
  resource: "change_request",
  scope: "project",
  id: { param: "crId" },
});
const trigger = (action: string): AuditRule => ({
  action,
  resource: "trigger",
  scope: "project",
  id: { param: "slug" },
});
const member = (action: string, id: AuditRule["id"]): AuditRule => ({
  action,
  resource: "member",
  scope: "account",
  id,
  names: role,
});

/**
 * What the audit log records, by route (`METHOD /pattern` as registered): the acts that change who may do what or
 * what reaches the default branch (merges, closes, tokens, secrets, members, triggers, channels, projects), from the
 * API and the dashboard's forms alike. Only a request that succeeded is recorded (api/audit/hook.ts).
 */
export const AUDITED: Record<string, AuditRule> = {
  "POST /v1/projects": { action: "project.create", resource: "project", scope: "account", id: { created: true } },

  "POST /v1/projects/:projectId/change-requests/:crId/merge": cr(mergeAction),
  "POST /v1/projects/:projectId/change-requests/:crId/close": cr("cr.close"),
  "POST /v1/projects/:projectId/change-requests/:crId/reopen": cr("cr.reopen"),
  "POST /dashboard/projects/:projectId/crs/:crId/merge": cr("cr.merge"),
  "POST /dashboard/projects/:projectId/crs/:crId/close": cr("cr.close"),
  "POST /dashboard/projects/:projectId/crs/:crId/reopen": cr("cr.reopen"),
  "POST /dashboard/projects/:projectId/crs/:crId/auto-merge": cr((body) =>
    body.on === "1" ? "cr.auto_merge.on" : "cr.auto_merge.off",
  ),

  "POST /v1/accounts/tokens": { action: "token.mint", resource: "token", scope: "user", id: { created: true } },
  "DELETE /v1/accounts/tokens/:tokenId": {
    action: "token.revoke",
    resource: "token",
    scope: "user",
    id: { param: "tokenId" },
  },
  // The answer redirects to the CLI's callback with the token in its query: nothing of it is read.
  "POST /dashboard/cli/login": { action: "token.mint", resource: "token", scope: "user" },
  "POST /v1/projects/:projectId/cli-token": {
    action: "token.mint",
    resource: "token",
    scope: "project",
    id: { created: true },
  },

  "PUT /v1/projects/:projectId/secrets": {
    action: "secrets.set",
    resource: "secrets",
    scope: "project",
    names: (body) => ({
      names: namesOf(Object.keys((body.secrets as Body | undefined) ?? {})),
    }),
  },
  "DELETE /v1/projects/:projectId/secrets": {
    action: "secrets.unset",
    resource: "secrets",
    scope: "project",
    names: (body) => ({ names: namesOf(body.names) }),
  },

  "POST /v1/accounts/members/invites": member("member.invite", { body: "email" }),
  "PATCH /v1/accounts/members/:email": member("member.role", { param: "email" }),
  "DELETE /v1/accounts/members/:email": member("member.remove", { param: "email" }),
  "POST /dashboard/members/invites": member("member.invite", { body: "email" }),
  "POST /dashboard/members/role": member("member.role", { body: "email" }),
  "POST /dashboard/members/remove": member("member.remove", { body: "email" }),

  "POST /v1/projects/:projectId/triggers/:slug/fire": trigger("trigger.fire"),
  "POST /dashboard/projects/:projectId/triggers/:slug/fire": trigger("trigger.fire"),
  "POST /v1/projects/:projectId/triggers/:slug/enable": trigger("trigger.enable"),
  "POST /v1/projects/:projectId/triggers/:slug/disable": trigger("trigger.disable"),

  "POST /v1/projects/:projectId/channels": {
    action: "channel.connect",
    resource: "channel",
    scope: "project",
    id: { created: true },
  },
  "DELETE /v1/projects/:projectId/channels/:channelRef": {
    action: "channel.disconnect",
    resource: "channel",
    scope: "project",
    id: { param: "channelRef" },
  },
};

/** An identifier the rule takes from the body, when its schema proves it one. */
export function bodyId(body: Body, field: "email"): string | null {
  const parsed = Email.safeParse(body[field]);
  return parsed.success ? parsed.data : null;
}
