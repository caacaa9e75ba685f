import type { AccountPlan, Plans, SetAccountPlanBody } from "../../protocol/plan.ts";
import type { Sql } from "../db/sql.ts";
import { type ApiError, apiError } from "../errors.ts";
import { liveSessions } from "../sessions/store.ts";

/** The plan of a stack without SVC_PLANS: the one every account is on, capped by SVC_SESSION_CAP. */
export const SINGLE_PLAN = "selfhost";

/** The stack's plans (SVC_PLANS) and the one an account without a plan of its own is on (SVC_DEFAULT_PLAN). */
export type PlanCatalogue = {
  plans: Plans;
  default: string;
  /** The stack setting the plans' caps come from: what a person raises them with. */
  setting: "SVC_PLANS" | "SVC_SESSION_CAP";
};

/** Without SVC_PLANS: one plan, whose cap is SVC_SESSION_CAP, as before plans existed. */
export const singlePlan = (sessionCap: number): PlanCatalogue => ({
  plans: { [SINGLE_PLAN]: { session_cap: sessionCap } },
  default: SINGLE_PLAN,
  setting: "SVC_SESSION_CAP",
});

/** An account's cap as a start is checked against it: `own` when the account has a cap of its own. */
export type AccountCap = { account: string; plan: string; session_cap: number; own: boolean };

/** The one refusal of a start past the cap (create, restart, wake, trigger, feedback, check): cap, plan, remedies. */
export function capRefusal(cap: AccountCap, setting: PlanCatalogue["setting"], current: number): ApiError {
  const [source, raise] = cap.own
    ? ["this account's own cap, set by the installation's administrator", "ask the administrator to raise it"]
    : setting === "SVC_SESSION_CAP"
      ? [
          "set by SVC_SESSION_CAP",
          "raise SVC_SESSION_CAP ('svc self-host env set SVC_SESSION_CAP=<n>', then 'svc self-host restart')",
        ]
      : ["the plan's session_cap in SVC_PLANS", "ask the installation's administrator for a larger plan"];
  return apiError(
    "SESSION_CAP_REACHED",
    `session cap reached: account '${cap.account}' on plan '${cap.plan}' may run ${cap.session_cap} sessions at ` +
      `once (${source}) and ${current} are starting or running; list them with 'svc sessions ls', stop or delete ` +
      `one ('svc sessions stop <id>' or 'svc sessions rm <id>'), or ${raise}, then try again`,
    { limit: cap.session_cap, current, plan: cap.plan },
  );
}

/**
 * Which plan each account is on: its `tier` when that names one of the stack's plans, else the default plan (an
 * account never given one, or whose plan the stack no longer has), with the account's own `session_cap` over the
 * plan's.
 */
export function createPlans(deps: { sql: Sql; catalogue: PlanCatalogue }) {
  const { sql, catalogue } = deps;

  async function capOf(accountId: string): Promise<AccountCap> {
    const [row] = await sql.query<{ slug: string; tier: string | null; session_cap: number | null }>(
      "select slug, tier, session_cap from accounts where id = $1",
      [accountId],
    );
    if (!row) throw apiError("NOT_FOUND", `account ${accountId} not found`);
    const plan = row.tier !== null && Object.hasOwn(catalogue.plans, row.tier) ? row.tier : catalogue.default;
    return {
      account: row.slug,
      plan,
      session_cap: row.session_cap ?? catalogue.plans[plan]!.session_cap,
      own: row.session_cap !== null,
    };
  }

  async function show(accountId: string): Promise<AccountPlan> {
    const cap = await capOf(accountId);
    return { plan: cap.plan, session_cap: cap.session_cap, sessions_live: await liveSessions(sql, accountId) };
  }

  return {
    capOf,
    show,

    refusal: (cap: AccountCap, current: number) => capRefusal(cap, catalogue.setting, current),

    /** The installation administrator's change of an account's plan or own cap; an absent field stays as it is. */
    async set(accountRef: string, body: SetAccountPlanBody): Promise<AccountPlan> {
      if (body.plan != null && !Object.hasOwn(catalogue.plans, body.plan))
        throw apiError(
          "VALIDATION_FAILED",
          `plan: no plan '${body.plan}'; the plans are ${Object.keys(catalogue.plans).join(", ")}`,
          { field: "plan" },
        );
      const [row] = await sql.query<{ id: string }>(
        `update accounts set tier = case when $2 then $3 else tier end,
           session_cap = case when $4 then $5::int else session_cap end
         where id::text = $1 or slug = $1 returning id`,
        [
          accountRef,
          body.plan !== undefined,
          body.plan ?? null,
          body.session_cap !== undefined,
          body.session_cap ?? null,
        ],
      );
      if (!row) throw apiError("NOT_FOUND", `account '${accountRef}' not found`);
      return show(row.id);
    },
  };
}

export type PlanService = ReturnType<typeof createPlans>;
