import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { CreatePreviewBody } from "../../protocol/preview.ts";
import { CreateSessionBody, SESSION_WAIT_DEFAULT_S, Session, SessionWaitQuery } from "../../protocol/session.ts";
import { actingUserId, authorizeProject, forbidSessionToken } from "../auth/authenticate.ts";
import { routeRole } from "../auth/route-roles.ts";
import { ApiError, apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { createPreviewLink } from "../previews/links.ts";
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
    // A closing server answers its waiting reads at once (their sessions as they are) rather than hold its close up.
    const closing = new AbortController();
    app.addHook("preClose", async () => closing.abort());

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
      const { project } = await authorizeProject(deps, req.principal!, projectId, routeRole(req)).catch(
        (err: unknown) => {
          throw err instanceof ApiError ? notFound : err;
        },
      );
      return present(await service().get(project, sessionId));
    });

    app.get(BASE, async (req) => {
      const sessions = await service().list(req.project!);
      // A session's token sees its own session only: its siblings' ids would be what it needs to reach them.
      const own = req.principal?.kind === "project" ? req.principal.sandbox?.sessionId : undefined;
      return { sessions: sessions.filter((s) => own === undefined || s.session_id === own).map(present) };
    });

    /** `?wait_for=running`: a long poll that answers when the session has started (protocol/session.ts). */
    app.get(`${BASE}/:sessionId`, async (req, reply) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      const query = parseInput(SessionWaitQuery, req.query, "query");
      if (!query.wait_for) return present(await service().get(req.project!, sessionId));
      // Ends with the client's connection too: nobody would read the answer.
      const stop = new AbortController();
      const abort = () => stop.abort();
      reply.raw.once("close", abort);
      closing.signal.addEventListener("abort", abort, { once: true });
      try {
        const session = await service().waitStarted(req.project!, sessionId, {
          timeoutMs: (query.timeout_s ?? SESSION_WAIT_DEFAULT_S) * 1000,
          progress: query.progress,
          signal: stop.signal,
        });
        // The server stops only once this connection ends: it must not be kept alive for a next request.
        if (closing.signal.aborted) reply.header("connection", "close");
        return present(session);
      } finally {
        closing.signal.removeEventListener("abort", abort);
      }
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
