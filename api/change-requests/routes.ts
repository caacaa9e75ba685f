import type { FastifyInstance } from "fastify";
import { z } from "zod";
import {
  CreateChangeRequestBody,
  ListChangeRequestsQuery,
  MergeChangeRequestBody,
  UpdateChangeRequestBody,
} from "../../protocol/change-request.ts";
import { actingUserId, mergingUserId } from "../auth/authenticate.ts";
import { shownRun } from "../checks/store.ts";
import { parseInput } from "../http/validate.ts";
import type { ChangeRequestService } from "./service.ts";

const BASE = "/v1/projects/:projectId/change-requests";
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });
const EmptyBody = z.object({}).strict().optional();

export function changeRequestRoutes(deps: { changeRequests: ChangeRequestService }) {
  const crs = deps.changeRequests;
  return async (app: FastifyInstance) => {
    app.get(BASE, async (req) => {
      const query = parseInput(ListChangeRequestsQuery, req.query, "query");
      return { change_requests: await crs.list(req.project!, query) };
    });

    app.post(BASE, async (req, reply) => {
      const body = parseInput(CreateChangeRequestBody, req.body, "body");
      return reply.code(201).send(await crs.create(req.project!, body, actingUserId(req.principal!)));
    });

    app.get(`${BASE}/:crId`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      return { change_request: await crs.get(req.project!, crId) };
    });

    app.patch(`${BASE}/:crId`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      const body = parseInput(UpdateChangeRequestBody, req.body, "body");
      return crs.edit(req.project!, crId, body.title, body.description);
    });

    app.get(`${BASE}/:crId/diff`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      return crs.diff(req.project!, crId);
    });

    app.get(`${BASE}/:crId/merge-preview`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      return crs.preview(req.project!, crId);
    });

    // SPEC rule 4: the agent never merges its own CR; a project token a person minted merges as them. Every other
    // CR route is open to project tokens. `auto`: queued to merge once its checks pass (202), merged later as this
    // same person.
    app.post(`${BASE}/:crId/merge`, async (req, reply) => {
      const userId = mergingUserId(req.principal!);
      const { crId } = parseInput(CrParams, req.params, "params");
      const body = parseInput(MergeChangeRequestBody, req.body ?? {}, "body");
      if (body.auto !== undefined)
        return reply.code(body.auto ? 202 : 200).send(await crs.setAutoMerge(req.project!, crId, userId, body.auto));
      return crs.merge(req.project!, crId, userId, { message: body.message, headSha: body.head_sha });
    });

    app.get(`${BASE}/:crId/checks`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      return (await crs.checks(req.project!, crId)).map(shownRun);
    });

    app.post(`${BASE}/:crId/close`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      parseInput(EmptyBody, req.body, "body");
      return crs.close(req.project!, crId, actingUserId(req.principal!));
    });

    app.post(`${BASE}/:crId/reopen`, async (req) => {
      const { crId } = parseInput(CrParams, req.params, "params");
      parseInput(EmptyBody, req.body, "body");
      return crs.reopen(req.project!, crId);
    });
  };
}
