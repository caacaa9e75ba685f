import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { CommitSha } from "../../protocol/change-request.ts";
import type { Project } from "../../protocol/project.ts";
import type { AuthDeps } from "../auth/authenticate.ts";
import type { ApprovalService } from "../change-requests/approvals.ts";
import { ApiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { CrViewer } from "./pages/change-request.ts";
import { browserProject } from "./project-access.ts";
import { requireCsrf } from "./session-auth.ts";

const HTML = "text/html; charset=utf-8";
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });
/** The CR page's Approve: the head the page showed. */
const ApproveForm = z.object({ _csrf: z.string(), head_sha: CommitSha.optional() }).strict();

export type CrApprovalPagesDeps = AuthDeps & {
  approvals: ApprovalService;
  /** The CR page, with a refusal in words. */
  renderCr: (project: Project, crId: string, viewer: CrViewer, refusal?: string) => Promise<string>;
};

/**
 * The CR page's Approve (`/dashboard/projects/{id}/crs/{n}/approve`), through the same service as `svc cr approve`.
 * Registered inside the signed-in part of the dashboard.
 */
export function crApprovalPages(deps: CrApprovalPagesDeps) {
  return async (app: FastifyInstance) => {
    app.post("/projects/:projectId/crs/:crId/approve", { preHandler: requireCsrf }, async (req, reply) => {
      const project = await browserProject(deps, req);
      const { crId } = parseInput(CrParams, req.params, "params");
      const form = parseInput(ApproveForm, req.body, "body");
      try {
        await deps.approvals.approve(project, crId, req.browserSession!.userId, form.head_sha);
      } catch (err) {
        // A head pushed since the page was shown, a CR merged or closed, one's own CR: the page again, saying so.
        if (!(err instanceof ApiError) || (err.status !== 409 && err.code !== "SELF_APPROVAL")) throw err;
        const page = await deps.renderCr(project, crId, req.browserSession!, err.message);
        return reply.code(err.status).type(HTML).send(page);
      }
      return reply.redirect(`/dashboard/projects/${project.id}/crs/${crId}#approvals`, 303);
    });
  };
}
