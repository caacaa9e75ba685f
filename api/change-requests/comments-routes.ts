import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { CreateCrCommentBody } from "../../protocol/cr-comment.ts";
import { actingUserId, type Principal } from "../auth/authenticate.ts";
import { parseInput } from "../http/validate.ts";
import type { Commenter, CommentService } from "./comments.ts";

const BASE = "/v1/projects/:projectId/change-requests/:crId";
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });
const EmptyBody = z.object({}).strict().optional();

/** A session's own token writes as that session's agent; any other token as its person. */
export const commenterOf = (principal: Principal): Commenter => ({
  userId: actingUserId(principal),
  sessionId: principal.kind === "project" ? (principal.sandbox?.sessionId ?? null) : null,
});

/** A CR's comments (`svc cr comment`, `svc cr comments`) and `svc cr resolve`; the CR by number or id. */
export function commentRoutes(deps: { comments: CommentService }) {
  return async (app: FastifyInstance) => {
    app.get(`${BASE}/comments`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      return deps.comments.list(req.project!, crId);
    });

    app.post(`${BASE}/comments`, async (req, reply) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      const body = parseInput(CreateCrCommentBody, req.body, "body");
      return reply.code(201).send(await deps.comments.add(req.project!, crId, body, commenterOf(req.principal!)));
    });

    // 202: the agent takes it in the background; the answer is the request as recorded, with its delivery.
    app.post(`${BASE}/resolve`, async (req, reply) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      parseInput(EmptyBody, req.body, "body");
      return reply.code(202).send(await deps.comments.resolve(req.project!, crId, commenterOf(req.principal!)));
    });
  };
}
