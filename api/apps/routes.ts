import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { AppDeployList, AppParams } from "../../protocol/app.ts";
import { LogsQuery } from "../../protocol/sandbox-access.ts";
import { actingUserId } from "../auth/authenticate.ts";
import { sendJsonLines } from "../http/json-lines.ts";
import { parseInput } from "../http/validate.ts";
import type { AppService } from "./service.ts";

const BASE = "/v1/projects/:projectId/apps";
const EmptyBody = z.object({}).strict().optional();

export function appRoutes(deps: { apps: AppService }) {
  const { apps } = deps;
  return async (app: FastifyInstance) => {
    app.get(BASE, async (req) => apps.list(req.project!));

    app.get(`${BASE}/:name`, async (req) => {
      const { name } = parseInput(AppParams, req.params, "params");
      return apps.get(req.project!, name);
    });

    app.get(`${BASE}/:name/deploys`, async (req) => {
      const { name } = parseInput(AppParams, req.params, "params");
      return AppDeployList.parse({ deploys: await apps.deploys(req.project!, name) });
    });

    for (const verb of ["redeploy", "rollback"] as const) {
      app.post(`${BASE}/:name/${verb}`, async (req, reply) => {
        const { name } = parseInput(AppParams, req.params, "params");
        parseInput(EmptyBody, req.body, "body");
        return reply.code(202).send(await apps[verb](req.project!, name));
      });
    }

    app.post(`${BASE}/:name/link`, async (req) => {
      const { name } = parseInput(AppParams, req.params, "params");
      parseInput(EmptyBody, req.body, "body");
      return apps.link(req.project!, name, actingUserId(req.principal!));
    });

    // JSON lines, one {stream, line} each, as `svc sessions logs` reads them.
    app.get(`${BASE}/:name/logs`, async (req, reply) => {
      const { name } = parseInput(AppParams, req.params, "params");
      const query = parseInput(LogsQuery, req.query, "query");
      const abort = new AbortController();
      const lines = await apps.logs(req.project!, name, {
        follow: query.follow === "1",
        tail: query.tail,
        signal: abort.signal,
      });
      await sendJsonLines(reply, lines, abort);
    });
  };
}
