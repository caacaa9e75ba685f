import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ApproveChangeRequestBody } from "../../protocol/cr-approval.ts";
import { actingUserId } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { ApprovalService } from "./approvals.ts";

const BASE = "/v1/projects/:projectId/change-requests/:crId";
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });

/** `svc cr approve` and a CR's approvals; the CR by number or id. */
export function approvalRoutes(deps: { approvals: ApprovalService }) {
  return async (app: FastifyInstance) => {
    app.get(`${BASE}/approvals`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      return deps.approvals.list(req.project!, crId);
    });

    // An approval is a person's review, refused to a session's token as a merge is: the token acts for the person
    // who started the session, and their agent must never stand in for anyone's review. A project token a person
    // minted is theirs. 201 for a new approval, 200 when this person had approved this head already.
    app.post(`${BASE}/approve`, async (req, reply) => {
      const principal = req.principal!;
      if (principal.kind === "project" && principal.sandbox)
        throw apiError(
          "PROJECT_TOKEN_NOT_ALLOWED",
          "a session's token cannot approve change requests: an approval is a person's review; use your own login (svc login)",
        );
      const userId = actingUserId(principal);
      const { crId } = parseInput(CrParams, req.params, "params");
      const body = parseInput(ApproveChangeRequestBody, req.body ?? {}, "body");
      const { approval, created } = await deps.approvals.approve(req.project!, crId, userId, body.head_sha);
      return reply.code(created ? 201 : 200).send(approval);
    });
  };
}
