import type { IncomingHttpHeaders } from "node:http";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Account, AccountRole } from "../../protocol/account.ts";
import { hashSecret } from "../../protocol/credential.ts";
import type { Project } from "../../protocol/project.ts";
import { SERVICE_KEY_PREFIX, TOKEN_PREFIX } from "../../protocol/token.ts";
import type { AccountStore } from "../accounts/store.ts";
import { requireAdmin } from "../admin/require-admin.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { activeAccount, namedAccount } from "../people/active-account.ts";
import { isUuid, type ProjectStore } from "../projects/store.ts";
import { resolveSessionId } from "../sessions/id-prefix.ts";
import { requireRole } from "./roles.ts";
import { isRole, requireRouteRoles, routeRole } from "./route-roles.ts";
import type { TokenSandbox, TokenStore } from "./token-store.ts";

export type Principal =
  | { kind: "user"; userId: string; tokenId: string }
  /** `sandbox`: a session's token (SVC_CLI_TOKEN), valid only while that sandbox is live; null: minted by a user. */
  | { kind: "project"; userId: string; projectId: string; tokenId: string; sandbox: TokenSandbox | null }
  /** The sandbox service key (SVC_TOKEN): accepted only by routes that opt in. */
  | { kind: "service"; sandboxId: string; sessionId: string; projectId: string };

/** The user an action is recorded against: a project token acts for the user it was minted for. */
export function actingUserId(principal: Principal): string {
  if (principal.kind === "service")
    throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key is not an API token");
  return principal.userId;
}

/**
 * Acts that are a person's own login's (minting credentials, signing a browser in): a user token only. A project
 * token, whether a session's SVC_CLI_TOKEN or one a user minted for a script, acts on its project but never
 * takes these; `action` completes "project tokens cannot ...".
 */
export function personalUserId(principal: Principal, action: string): string {
  if (principal.kind === "project")
    throw apiError("PROJECT_TOKEN_NOT_ALLOWED", `project tokens cannot ${action}: use your own login (svc login)`);
  return actingUserId(principal);
}

/**
 * Who merges (SPEC rule 4: the agent never merges its CR; DESIGN: a project token minted by a person acts as that
 * person on one project, a sandbox's token never merges): a user token, or a project token a person minted, as
 * that person; their role was checked with the route's.
 */
export function mergingUserId(principal: Principal): string {
  if (principal.kind === "project" && principal.sandbox)
    throw apiError(
      "PROJECT_TOKEN_NOT_ALLOWED",
      "a session's token cannot merge change requests: merging is a person's act; use your own login (svc login)",
    );
  return actingUserId(principal);
}

/**
 * A session's own token (SVC_CLI_TOKEN) acts on its session only: with the project's reach, an agent could read,
 * prompt or stop its sibling sessions. Compared before any lookup, so it learns nothing of other ids either.
 */
export function checkSessionScope(principal: Principal, sessionId: string): void {
  if (principal.kind === "project" && principal.sandbox && principal.sandbox.sessionId !== sessionId) {
    throw apiError("SESSION_SCOPE", "a session's token acts on its own session only");
  }
}

/** An agent starts no sessions: that would be a way around the session cap and around its own session's scope. */
export function forbidSessionToken(principal: Principal, action: string): void {
  if (principal.kind === "project" && principal.sandbox) {
    throw apiError("SESSION_SCOPE", `a session's token cannot ${action}: use your own login (svc login)`);
  }
}

/**
 * Who may call a route:
 * - public: anyone;
 * - account: user tokens only (SPEC: account routes reject project tokens);
 * - principal: user or project tokens, no project in the path;
 * - project: user or project tokens with access to `:projectId` (SPEC Authentication rules 1-3).
 */
export type AuthPolicy = "public" | "account" | "principal" | "project";

declare module "fastify" {
  interface FastifyContextConfig {
    auth?: AuthPolicy;
    /** On project routes: also accept the sandbox service key of a sandbox of that project. */
    allowServiceKey?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
    project: Project | null;
    /** On an account route whose line in ROUTE_ROLES is a role: the account it acts on. */
    account: Account | null;
    /** The caller's role in the account of `project` or `account`, once checked against the route's. */
    role: AccountRole | null;
  }
}

export type AuthDeps = { sql: Sql; tokens: TokenStore; accounts: AccountStore; projects: ProjectStore };

/** The token of an `Authorization: Bearer` header, on any request (Fastify's or a raw one). */
export function bearer(req: { headers: IncomingHttpHeaders }): string {
  const header = req.headers.authorization;
  if (!header) throw apiError("UNAUTHENTICATED", "missing Authorization: Bearer <token> header");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw apiError("UNAUTHENTICATED", "Authorization header must be 'Bearer <token>'");
  return match[1]!;
}

export async function resolvePrincipal(deps: AuthDeps, secret: string): Promise<Principal> {
  if (secret.startsWith(SERVICE_KEY_PREFIX)) {
    const [row] = await deps.sql.query<{ sandbox_id: string; session_id: string; project_id: string }>(
      "select sandbox_id, session_id, project_id from session_sandboxes where service_key_hash = $1 and status in ('provisioning', 'active')",
      [hashSecret(secret)],
    );
    if (!row) throw apiError("UNAUTHENTICATED", "invalid or revoked token");
    return { kind: "service", sandboxId: row.sandbox_id, sessionId: row.session_id, projectId: row.project_id };
  }
  if (!secret.startsWith(TOKEN_PREFIX)) throw apiError("UNAUTHENTICATED", "malformed token");
  const found = await deps.tokens.lookup(secret);
  if (found.status === "expired") throw apiError("TOKEN_EXPIRED", "token has expired; log in again");
  if (found.status === "unknown") throw apiError("UNAUTHENTICATED", "invalid or revoked token");
  if (found.status === "ended") throw apiError("UNAUTHENTICATED", "this token's session sandbox is no longer running");
  const { token, sandbox } = found;
  return token.project_id
    ? { kind: "project", userId: token.user_id, projectId: token.project_id, tokenId: token.id, sandbox }
    : { kind: "user", userId: token.user_id, tokenId: token.id };
}

export type ProjectAccess = { project: Project; role: AccountRole };

/** The role in the project's account of the person a token acts for; a person no longer a member has none. */
async function roleInProject(deps: AuthDeps, userId: string, project: Project, who: string): Promise<AccountRole> {
  const role = await deps.accounts.role(userId, project.account_id);
  if (!role) throw apiError("NOT_A_MEMBER", `${who} not a member of this project's account`);
  return role;
}

/**
 * Loads the project named in the path and checks that the principal holds at least `least` in its account: a
 * user token its user's role, a project token the role of the person it acts for (SPEC rules 1-3).
 */
export async function authorizeProject(
  deps: AuthDeps,
  principal: Principal,
  ref: string,
  least: AccountRole,
  options: { allowServiceKey?: boolean } = {},
): Promise<ProjectAccess> {
  if (principal.kind === "service" && !options.allowServiceKey) {
    throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key is not an API token; use SVC_CLI_TOKEN");
  }
  let access: ProjectAccess;
  if (principal.kind !== "user") {
    // Rule 1: compare before any lookup, so a project token learns nothing about other projects.
    if (isUuid(ref) && ref.toLowerCase() !== principal.projectId) {
      throw apiError("TOKEN_PROJECT_MISMATCH", "this token is scoped to another project");
    }
    const project = await deps.projects.byId(principal.projectId);
    if (!project || (!isUuid(ref) && ref !== project.slug)) {
      throw apiError("TOKEN_PROJECT_MISMATCH", "this token is scoped to another project");
    }
    // The service key is a sandbox's, no person's: where a route admits it, it reads, as a viewer would.
    const role =
      principal.kind === "service"
        ? "viewer"
        : await roleInProject(deps, principal.userId, project, "the person this token acts for is");
    access = { project, role };
  } else if (isUuid(ref)) {
    const project = await deps.projects.byId(ref);
    if (!project) throw apiError("PROJECT_NOT_FOUND", `project ${ref} not found`);
    access = { project, role: await roleInProject(deps, principal.userId, project, "you are") };
  } else {
    // The memberships come with their roles: no second lookup for the one of the project's account.
    const accounts = await deps.accounts.accounts(principal.userId);
    const matches = await deps.projects.bySlug(
      ref,
      accounts.map((a) => a.id),
    );
    if (matches.length === 0) throw apiError("PROJECT_NOT_FOUND", `project '${ref}' not found`);
    if (matches.length > 1) throw apiError("BAD_REQUEST", `project slug '${ref}' is ambiguous; use the project id`);
    const project = matches[0]!;
    access = { project, role: accounts.find((a) => a.id === project.account_id)!.role };
  }
  requireRole(access.role, least);
  return access;
}

/**
 * The account an account route acts on: the one the request names (`account_id` in its query or body), else the
 * caller's active account (ACCOUNT_HEADER's, else their first). A malformed id names none: the route's own
 * validation answers it.
 */
async function requestedAccount(deps: AuthDeps, userId: string, req: FastifyRequest): Promise<Account> {
  const named = [req.query, req.body]
    .map((input) => (input as { account_id?: unknown } | null | undefined)?.account_id)
    .find((id): id is string => typeof id === "string" && isUuid(id));
  if (named === undefined) return activeAccount(deps.accounts, userId, namedAccount(req));
  const account = (await deps.accounts.accounts(userId)).find((a) => a.id === named);
  if (!account) throw apiError("NOT_A_MEMBER", "you are not a member of that account", { field: "account_id" });
  return account;
}

/**
 * Every route's credential and role, checked before its handler: the principal from the bearer token, and the
 * route's line of ROUTE_ROLES against the caller's role in the project's account (project routes) or in the
 * account the request acts on (account routes). Public routes (the dashboard's cookie pages, git) check theirs
 * with the same table through authorizeProject.
 */
export function registerAuthentication(app: FastifyInstance, deps: AuthDeps): void {
  requireRouteRoles(app);
  app.decorateRequest("principal", null);
  app.decorateRequest("project", null);
  app.decorateRequest("account", null);
  app.decorateRequest("role", null);
  app.addHook("preHandler", async (req) => {
    const policy = req.routeOptions.config.auth ?? "project";
    if (policy === "public" || req.is404) return;
    const principal = await resolvePrincipal(deps, bearer(req));
    req.principal = principal;
    const access = req.routeOptions.config.access;
    if (policy === "account") {
      if (principal.kind === "project")
        throw apiError("PROJECT_TOKEN_NOT_ALLOWED", "project tokens cannot call account routes");
      if (principal.kind === "service")
        throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key cannot call account routes");
      if (access === "installation-admin") await requireAdmin(deps.sql, principal.userId);
      if (isRole(access)) {
        req.account = await requestedAccount(deps, principal.userId, req);
        requireRole(req.account.role, access);
        req.role = req.account.role;
      }
      return;
    }
    const params = req.params as { projectId?: string; sessionId?: string };
    const ref = params.projectId;
    if (policy === "principal") {
      if (principal.kind === "service")
        throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key is not an API token");
    } else {
      if (!ref) throw new Error(`route ${req.routeOptions.url} has auth=project but no :projectId`);
      const { project, role } = await authorizeProject(deps, principal, ref, routeRole(req), {
        allowServiceKey: req.routeOptions.config.allowServiceKey,
      });
      req.project = project;
      req.role = role;
    }
    if (params.sessionId === undefined) return;
    // A prefix becomes the whole id here, once, for the scope check below and for every route after it.
    const project = req.project;
    const mayRead = (least: AccountRole) => (projectId: string) =>
      authorizeProject(deps, principal, projectId, least).then(
        () => true,
        () => false,
      );
    params.sessionId = await resolveSessionId(
      deps.sql,
      params.sessionId,
      project ? { projectId: project.id } : { mayRead: mayRead(routeRole(req)) },
    );
    // Every route under one session (`:sessionId`) is scoped here, not in each route.
    checkSessionScope(principal, params.sessionId);
  });
}
