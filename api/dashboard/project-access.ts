import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { Project } from "../../protocol/project.ts";
import type { AccountStore } from "../accounts/store.ts";
import { type AuthDeps, authorizeProject } from "../auth/authenticate.ts";
import { requireRole } from "../auth/roles.ts";
import { isRole, routeRole } from "../auth/route-roles.ts";
import { ApiError, apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { activeAccount } from "../people/active-account.ts";
import { cookieValue } from "./session-auth.ts";

const ProjectParams = z.object({ projectId: z.string() });

/** The account a browser's account pages act on: its choice (slug), as `svc accounts use` is the CLI's. */
export const ACCOUNT_COOKIE = "svc_account";

/**
 * The account a signed-in browser's account pages (members, audit) act on: the one it chose, else the person's
 * first; a choice of an account they have left falls back to the first.
 */
export async function dashboardAccount(accounts: AccountStore, req: FastifyRequest) {
  const userId = req.browserSession!.userId;
  const chosen = cookieValue(req.headers.cookie, ACCOUNT_COOKIE);
  return activeAccount(accounts, userId, chosen && decodeURIComponent(chosen)).catch(() =>
    activeAccount(accounts, userId),
  );
}

/**
 * The preHandler of the signed-in pages, after the browser session's: a page whose line of ROUTE_ROLES is a role
 * but that names no project acts on the person's active account, and their role there is checked here, before its
 * handler, as the auth hook checks the API's account routes. Pages of a project are checked by browserProject.
 */
export function requireAccountRole(deps: { accounts: AccountStore }) {
  return async (req: FastifyRequest): Promise<void> => {
    const access = req.routeOptions.config.access;
    if (!req.browserSession || !isRole(access) || "projectId" in (req.params as object)) return;
    const account = await dashboardAccount(deps.accounts, req);
    requireRole(account.role, access);
    req.role = account.role;
    req.account = account;
  };
}

/**
 * The `:projectId` of a signed-in dashboard page, authorized as the REST routes authorize a user token, with the
 * page's line of ROUTE_ROLES (the caller's role is left in `req.role` for the page); a project of an account the
 * user is not a member of is answered as one that does not exist.
 */
export async function browserProject(deps: AuthDeps, req: FastifyRequest): Promise<Project> {
  const { projectId } = parseInput(ProjectParams, req.params, "params");
  const session = req.browserSession!;
  const principal = { kind: "user" as const, userId: session.userId, tokenId: session.id };
  const { project, role } = await authorizeProject(deps, principal, projectId, routeRole(req)).catch((err: unknown) => {
    if (err instanceof ApiError && err.code === "NOT_A_MEMBER")
      throw apiError("PROJECT_NOT_FOUND", `project ${projectId} not found`);
    throw err;
  });
  req.role = role;
  return project;
}
