import { readFileSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Project } from "../../protocol/project.ts";
import type { AuthDeps } from "../auth/authenticate.ts";
import type { ChangeRequestService } from "../change-requests/service.ts";
import { shownRun } from "../checks/store.ts";
import { ApiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { CrViewer } from "./pages/change-request.ts";
import { CR_CHECKS_SCRIPT_PATH, checksBody, checksLive, mergeBlocked, pageState } from "./pages/cr-checks.ts";
import { browserProject } from "./project-access.ts";
import { requireCsrf } from "./session-auth.ts";

/** Read once: the bundle has it beside itself (dist/assets), the sources beside this module. */
const CHECKS_SCRIPT = readFileSync(new URL("./assets/cr-checks.js", import.meta.url), "utf8");

const HTML = "text/html; charset=utf-8";
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });
/** The CR page's auto-merge toggle: "1" queues the CR, "0" takes it out. */
const AutoMergeForm = z.object({ _csrf: z.string(), on: z.enum(["0", "1"]) }).strict();

export type CrCheckPagesDeps = AuthDeps & {
  changeRequests: ChangeRequestService;
  /** The CR page, with a refusal in words. */
  renderCr: (project: Project, crId: string, viewer: CrViewer, refusal?: string) => Promise<string>;
};

/**
 * The CR page's checks as its script follows them, and its auto-merge toggle (`/dashboard/projects/{id}/crs/{n}/…`),
 * through the same service as `svc cr checks` and `svc cr merge --auto`. Registered inside the signed-in part of the
 * dashboard.
 */
export function crCheckPages(deps: CrCheckPagesDeps) {
  return async (app: FastifyInstance) => {
    const base = "/projects/:projectId/crs/:crId";

    app.get(CR_CHECKS_SCRIPT_PATH.slice("/dashboard".length), async (_req, reply) =>
      reply.type("text/javascript; charset=utf-8").send(CHECKS_SCRIPT),
    );

    // The live section: the checks as the page renders them, whether Merge may be pressed, and whether to go on.
    app.get(`${base}/checks`, async (req) => {
      const project = await browserProject(deps, req);
      const { crId } = parseInput(CrParams, req.params, "params");
      const cr = await deps.changeRequests.get(project, crId);
      const runs = (await deps.changeRequests.checks(project, cr.cr_id)).map(shownRun);
      return {
        state: pageState(cr),
        live: checksLive(cr, runs),
        merge_blocked: mergeBlocked(cr) ?? null,
        html: checksBody(cr, runs).__html,
      };
    });

    app.post(`${base}/auto-merge`, { preHandler: requireCsrf }, async (req, reply) => {
      const project = await browserProject(deps, req);
      const { crId } = parseInput(CrParams, req.params, "params");
      const { on } = parseInput(AutoMergeForm, req.body, "body");
      try {
        const cr = await deps.changeRequests.setAutoMerge(project, crId, req.browserSession!.userId, on === "1");
        return reply.redirect(`/dashboard/projects/${project.id}/crs/${cr.number}#merge`, 303);
      } catch (err) {
        // A CR merged or closed meanwhile: the page again, saying so.
        if (!(err instanceof ApiError) || err.status !== 409) throw err;
        const page = await deps.renderCr(project, crId, req.browserSession!, err.message);
        return reply.code(409).type(HTML).send(page);
      }
    });
  };
}
