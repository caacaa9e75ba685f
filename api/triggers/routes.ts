import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { Session } from "../../protocol/session.ts";
import { TriggerParams } from "../../protocol/trigger.ts";
import { actingUserId, forbidSessionToken } from "../auth/authenticate.ts";
import { parseInput } from "../http/validate.ts";
import type { TriggerService } from "./service.ts";

const BASE = "/v1/projects/:projectId/triggers";
const EmptyBody = z.object({}).strict().optional();

export function triggerRoutes(deps: { triggers: TriggerService }) {
  const triggers = deps.triggers;
  return async (app: FastifyInstance) => {
    app.get(BASE, async (req) => triggers.list(req.project!));

    app.get(`${BASE}/:slug`, async (req) => {
      const { slug } = parseInput(TriggerParams, req.params, "params");
      return triggers.get(req.project!, slug);
    });

    app.post(`${BASE}/:slug/fire`, async (req, reply) => {
      forbidSessionToken(req.principal!, "fire triggers (a fired trigger starts a session)");
      const { slug } = parseInput(TriggerParams, req.params, "params");
      parseInput(EmptyBody, req.body, "body");
      return reply.code(201).send(Session.parse(await triggers.fireNow(req.project!, slug)));
    });

    for (const [verb, enabled] of [
      ["enable", true],
      ["disable", false],
    ] as const) {
      app.post(`${BASE}/:slug/${verb}`, async (req, reply) => {
        const { slug } = parseInput(TriggerParams, req.params, "params");
        parseInput(EmptyBody, req.body, "body");
        const change = await triggers.setEnabled(req.project!, slug, enabled, actingUserId(req.principal!));
        return reply.code(201).send({ change_request: change });
      });
    }
  };
}
