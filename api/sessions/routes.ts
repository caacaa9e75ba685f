import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { CreatePreviewBody } from "../../protocol/preview.ts";
import { CreateSessionBody, Session } from "../../protocol/session.ts";
import { actingUserId, authorizeProject, forbidSessionToken } from "../auth/authenticate.ts";
import { ApiError, apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { createPreviewLink } from "./preview-links.ts";
import { type SessionAccessDeps, sessionsOf } from "./session-access.ts";
import type { SessionRecord } from "./store.ts";

const BASE = "/v1/projects/:projectId/sessions";
/** `:projectId` and `:sessionId` of every route under a session. */
export const Params = z.object({ projectId: z.string(), sessionId: z.string().min(1).max(100) });
const SessionIdParams = Params.pick({ sessionId: true });

/** Only the SPEC's session attributes leave the API. */
const present = (s: SessionRecord) => Session.parse(s);

export function sessionRoutes(deps: SessionAccessDeps) {
  const service = () => sessionsOf(deps);
  return async (app: FastifyInstance) => {
    app.post(BASE, async (req, reply) => {
      forbidSessionToken(req.principal!, "start sessions");
      const body = parseInput(CreateSessionBody, req.body ?? {}, "body");
      const session = await service().create(req.project!, body, actingUserId(req.principal!));
      return reply.code(201).send(present(session));
    });

    /**
     * A session by its id alone, so that a client holding only the id finds its project. The principal's own
     * project access decides; a session it may not see is answered exactly as one that does not exist.
     */
    app.get("/v1/sessions/:sessionId", { config: { auth: "principal" } }, async (req) => {
      const { sessionId } = parseInput(SessionIdParams, req.params, "params");
      const notFound = apiError("SESSION_NOT_FOUND", `session ${sessionId} not found`);
      const projectId = await service().projectOf(sessionId);
      if (!projectId) throw notFound;
      const project = await authorizeProject(deps, req.principal!, projectId, false).catch((err: unknown) => {
        throw err instanceof ApiError ? notFound : err;
      });
      return present(await service().get(project, sessionId));
    });

    app.get(BASE, async (req) => {
      const sessions = await service().list(req.project!);
      // A session's token sees its own session only: its siblings' ids would be what it needs to reach them.
      const own = req.principal?.kind === "project" ? req.principal.sandbox?.sessionId : undefined;
      return { sessions: sessions.filter((s) => own === undefined || s.session_id === own).map(present) };
    });

    app.get(`${BASE}/:sessionId`, async (req) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      return present(await service().get(req.project!, sessionId));
    });

    app.post(`${BASE}/:sessionId/stop`, async (req) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      return present(await service().stop(req.project!, sessionId));
    });

    app.post(`${BASE}/:sessionId/restart`, async (req) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      return present(await service().restart(req.project!, sessionId));
    });

    app.post(`${BASE}/:sessionId/previews`, async (req, reply) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      const { port } = parseInput(CreatePreviewBody, req.body ?? {}, "body");
      const link = await createPreviewLink(deps, req.project!, sessionId, actingUserId(req.principal!), port);
      return reply.code(201).send(link);
    });

    app.delete(`${BASE}/:sessionId`, async (req, reply) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      await service().remove(req.project!, sessionId);
      return reply.code(204).send();
    });
  };
}
