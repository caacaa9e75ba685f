import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { type AccountPlan, SetAccountPlanBody } from "../../protocol/plan.ts";
import { parseInput } from "../http/validate.ts";
import type { PlanService } from "./plans.ts";

const AccountParams = z.object({ account: z.string().min(1).max(100) });

/**
 * `GET /v1/accounts/plan`: the active account's plan and cap; `PUT /v1/admin/accounts/{slug or id}/plan`: the
 * installation's administrator moves an account to another plan or gives it a cap of its own.
 */
export function planRoutes(deps: { plans: PlanService }) {
  return async (app: FastifyInstance) => {
    app.get(
      "/v1/accounts/plan",
      { config: { auth: "account" } },
      async (req): Promise<AccountPlan> => deps.plans.show(req.account!.id),
    );

    app.put("/v1/admin/accounts/:account/plan", { config: { auth: "account" } }, async (req): Promise<AccountPlan> => {
      const { account } = parseInput(AccountParams, req.params, "params");
      return deps.plans.set(account, parseInput(SetAccountPlanBody, req.body, "body"));
    });
  };
}
