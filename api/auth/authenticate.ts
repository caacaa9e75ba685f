import type { IncomingHttpHeaders } from "node:http";
import type { FastifyInstance } from "fastify";
import { hashSecret } from "../../protocol/credential.ts";
import type { Project } from "../../protocol/project.ts";
import { SERVICE_KEY_PREFIX, TOKEN_PREFIX } from "../../protocol/token.ts";
import type { AccountStore } from "../accounts/store.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { isUuid, type ProjectStore } from "../projects/store.ts";
import { resolveSessionId } from "../sessions/id-prefix.ts";
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
 * Acts that are a person's own (SPEC rule 4: the user merges; minting credentials): a user token only. A project
 * token, whether a session's SVC_CLI_TOKEN or one a user minted for a script, acts on its project but never
 * takes these; `action` completes "project tokens cannot ...".
 */
export function personalUserId(principal: Principal, action: string): string {
  if (principal.kind === "project")
    throw apiError("PROJECT_TOKEN_NOT_ALLOWED", `project tokens cannot ${action}: use your own login (svc login)`);
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

/** Loads the project named in the path and checks that the principal may write to it. */
export async function authorizeProject(
  deps: AuthDeps,
  principal: Principal,
  ref: string,
  allowServiceKey: boolean,
): Promise<Project> {
  if (principal.kind === "service" && !allowServiceKey) {
    throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key is not an API token; use SVC_CLI_TOKEN");
  }
  if (principal.kind !== "user") {
    // Rule 1: compare before any lookup, so a project token learns nothing about other projects.
    if (isUuid(ref) && ref.toLowerCase() !== principal.projectId) {
      throw apiError("TOKEN_PROJECT_MISMATCH", "this token is scoped to another project");
    }
    const project = await deps.projects.byId(principal.projectId);
    if (!project || (!isUuid(ref) && ref !== project.slug)) {
      throw apiError("TOKEN_PROJECT_MISMATCH", "this token is scoped to another project");
    }
    return project;
  }
  if (isUuid(ref)) {
    const project = await deps.projects.byId(ref);
    if (!project) throw apiError("PROJECT_NOT_FOUND", `project ${ref} not found`);
    if (!(await deps.accounts.isMember(principal.userId, project.account_id))) {
      throw apiError("NOT_A_MEMBER", "you are not a member of this project's account");
    }
    return project;
  }
  const accounts = await deps.accounts.accounts(principal.userId);
  const matches = await deps.projects.bySlug(
    ref,
    accounts.map((a) => a.id),
  );
  if (matches.length === 0) throw apiError("PROJECT_NOT_FOUND", `project '${ref}' not found`);
  if (matches.length > 1) throw apiError("BAD_REQUEST", `project slug '${ref}' is ambiguous; use the project id`);
  return matches[0]!;
}

export function registerAuthentication(app: FastifyInstance, deps: AuthDeps): void {
  app.decorateRequest("principal", null);
  app.decorateRequest("project", null);
  app.addHook("preHandler", async (req) => {
    const policy = req.routeOptions.config.auth ?? "project";
    if (policy === "public" || req.is404) return;
    const principal = await resolvePrincipal(deps, bearer(req));
    req.principal = principal;
    if (policy === "account") {
      if (principal.kind === "project")
        throw apiError("PROJECT_TOKEN_NOT_ALLOWED", "project tokens cannot call account routes");
      if (principal.kind === "service")
        throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key cannot call account routes");
      return;
    }
    const params = req.params as { projectId?: string; sessionId?: string };
    const ref = params.projectId;
    if (policy === "principal") {
      if (principal.kind === "service")
        throw apiError("SERVICE_KEY_NOT_ALLOWED", "the sandbox service key is not an API token");
    } else {
      if (!ref) throw new Error(`route ${req.routeOptions.url} has auth=project but no :projectId`);
      req.project = await authorizeProject(deps, principal, ref, req.routeOptions.config.allowServiceKey ?? false);
    }
    if (params.sessionId === undefined) return;
    // A prefix becomes the whole id here, once, for the scope check below and for every route after it.
    const project = req.project;
    params.sessionId = await resolveSessionId(
      deps.sql,
      params.sessionId,
      project
        ? { projectId: project.id }
        : {
            mayRead: (projectId) =>
              authorizeProject(deps, principal, projectId, false).then(
                () => true,
                () => false,
              ),
          },
    );
    // Every route under one session (`:sessionId`) is scoped here, not in each route.
    checkSessionScope(principal, params.sessionId);
  });
}
