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

const ProjectParams = z.object({ projectId: z.string() });

/**
 * The preHandler of the signed-in pages, after the browser session's: a page whose line of ROUTE_ROLES is a role
 * but that names no project acts on the person's active account, and their role there is checked here, before its
 * handler, as the auth hook checks the API's account routes. Pages of a project are checked by browserProject.
 */
export function requireAccountRole(deps: { accounts: AccountStore }) {
  return async (req: FastifyRequest): Promise<void> => {
    const access = req.routeOptions.config.access;
    if (!req.browserSession || !isRole(access) || "projectId" in (req.params as object)) return;
    const account = await activeAccount(deps.accounts, req.browserSession.userId);
    requireRole(account.role, access);
    req.role = account.role;
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
