import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { Project } from "../../protocol/project.ts";
import { type AuthDeps, authorizeProject } from "../auth/authenticate.ts";
import { ApiError, apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";

const ProjectParams = z.object({ projectId: z.string() });

/**
 * The `:projectId` of a signed-in dashboard page, authorized as the REST routes authorize a user token; a project
 * of an account the user is not a member of is answered as one that does not exist.
 */
export async function browserProject(deps: AuthDeps, req: FastifyRequest): Promise<Project> {
  const { projectId } = parseInput(ProjectParams, req.params, "params");
  const session = req.browserSession!;
  const principal = { kind: "user" as const, userId: session.userId, tokenId: session.id };
  return authorizeProject(deps, principal, projectId, false).catch((err: unknown) => {
    if (err instanceof ApiError && err.code === "NOT_A_MEMBER")
      throw apiError("PROJECT_NOT_FOUND", `project ${projectId} not found`);
    throw err;
  });
}
