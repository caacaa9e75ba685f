import type { FastifyInstance } from "fastify";
import { type Usage, UsageQuery } from "../../protocol/usage.ts";
import { parseInput } from "../http/validate.ts";
import type { UsageStore } from "./store.ts";

/** `GET /v1/accounts/usage?from=&to=`: the active account's sandbox-seconds and sessions per project per day. */
export function usageRoutes(deps: { usage: UsageStore }) {
  return async (app: FastifyInstance) => {
    app.get(
      "/v1/accounts/usage",
      { config: { auth: "account" } },
      async (req): Promise<Usage> => deps.usage.usage(req.account!.id, parseInput(UsageQuery, req.query, "query")),
    );
  };
}
