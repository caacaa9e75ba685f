import type { Project } from "../../protocol/project.ts";
import { apiError } from "../errors.ts";

/**
 * A branch a client names that only differs from the default branch in case (`Main` beside `main`): a CR into it,
 * or a session cut from it, would look like the default branch and be another one. Refused with the field named.
 */
export function refuseDefaultBranchLookalike(project: Project, branch: string | undefined, field: string): void {
  const protectedBranch = project.default_branch;
  if (!branch || branch === protectedBranch || branch.toLowerCase() !== protectedBranch.toLowerCase()) return;
  throw apiError(
    "VALIDATION_FAILED",
    `${field}: '${branch}' differs from the default branch '${protectedBranch}' only in case; name it exactly or pick another name`,
    { field },
  );
}
