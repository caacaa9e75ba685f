import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { CreateCrCommentBody } from "../../protocol/cr-comment.ts";
import type { Project } from "../../protocol/project.ts";
import type { AuthDeps } from "../auth/authenticate.ts";
import type { CommentService } from "../change-requests/comments.ts";
import { ApiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { CrViewer, LineTarget } from "./pages/change-request.ts";
import { browserProject } from "./project-access.ts";
import { requireCsrf } from "./session-auth.ts";

const HTML = "text/html; charset=utf-8";
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });
/** The CR page's comment forms: the general one, and a diff line's (path and line as hidden fields). */
const CommentForm = z
  .object({
    _csrf: z.string(),
    body: z.string().max(100_000),
    path: z.string().max(4096).optional(),
    line: z.coerce.number().int().positive().optional(),
    to_agent: z.literal("1").optional(),
  })
  .strict();
const CsrfOnly = z.object({ _csrf: z.string() }).strict();

export type CrCommentPagesDeps = AuthDeps & {
  comments: CommentService;
  /** The CR page, with a refusal in words and the line form open where the person was writing. */
  renderCr: (
    project: Project,
    crId: string,
    viewer: CrViewer,
    refusal?: string,
    lineTarget?: LineTarget,
  ) => Promise<string>;
};

/**
 * The CR page's comment box, line comments and "Resolve conflicts" (`/dashboard/projects/{id}/crs/{n}/…`), through
 * the same service as `svc cr comment` and `svc cr resolve`. Registered inside the signed-in part of the dashboard.
 */
export function crCommentPages(deps: CrCommentPagesDeps) {
  return async (app: FastifyInstance) => {
    const base = "/projects/:projectId/crs/:crId";

    /** Post/redirect/get on success; a refusal a person can act on comes back on the page, nothing stored. */
    const act =
      (
        work: (req: FastifyRequest, project: Project, crId: string) => Promise<unknown>,
        target?: (req: FastifyRequest) => LineTarget | undefined,
      ) =>
      async (req: FastifyRequest, reply: FastifyReply) => {
        const project = await browserProject(deps, req);
        const { crId } = parseInput(CrParams, req.params, "params");
        try {
          await work(req, project, crId);
        } catch (err) {
          if (!(err instanceof ApiError) || err.status >= 500) throw err;
          const page = await deps.renderCr(project, crId, req.browserSession!, err.message, target?.(req));
          return reply.code(err.status).type(HTML).send(page);
        }
        return reply.redirect(`/dashboard/projects/${project.id}/crs/${crId}#comments`, 303);
      };

    const lineOf = (req: FastifyRequest): LineTarget | undefined => {
      const form = CommentForm.safeParse(req.body);
      return form.success && form.data.path && form.data.line
        ? { path: form.data.path, line: form.data.line }
        : undefined;
    };

    app.post(
      `${base}/comments`,
      { preHandler: requireCsrf },
      act(async (req, project, crId) => {
        const form = parseInput(CommentForm, req.body, "body");
        const body = parseInput(
          CreateCrCommentBody,
          { body: form.body, path: form.path, line: form.line, to_agent: form.to_agent === "1" || undefined },
          "body",
        );
        await deps.comments.add(project, crId, body, { userId: req.browserSession!.userId, sessionId: null });
      }, lineOf),
    );

    app.post(
      `${base}/resolve`,
      { preHandler: requireCsrf },
      act(async (req, project, crId) => {
        parseInput(CsrfOnly, req.body, "body");
        await deps.comments.resolve(project, crId, { userId: req.browserSession!.userId, sessionId: null });
      }),
    );
  };
}
