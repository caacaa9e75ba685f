import { describe, expect, it } from "vitest";
import { loadConfig } from "../config.ts";
import { capRefusal, SINGLE_PLAN } from "./plans.ts";

describe("plans", () => {
  it("reads SVC_PLANS and SVC_DEFAULT_PLAN, failing the start with the setting's name", () => {
    expect(loadConfig({}).plans).toBeUndefined();
    const plans = '{"free":{"session_cap":2},"team":{"session_cap":10}}';
    expect(loadConfig({ SVC_PLANS: plans }).plans).toEqual({
      plans: { free: { session_cap: 2 }, team: { session_cap: 10 } },
      default: "free",
      setting: "SVC_PLANS",
    });
    expect(loadConfig({ SVC_PLANS: plans, SVC_DEFAULT_PLAN: "team" }).plans?.default).toBe("team");
    for (const [env, message] of [
      [{ SVC_PLANS: "{free}" }, /SVC_PLANS: must be JSON/],
      [{ SVC_PLANS: "{}" }, /SVC_PLANS: must name a plan/],
      [{ SVC_PLANS: '{"free":{"session_cap":0}}' }, /SVC_PLANS/],
      [{ SVC_PLANS: '{"Free!":{"session_cap":2}}' }, /SVC_PLANS/],
      [{ SVC_PLANS: '{"free":{"sessions":2}}' }, /SVC_PLANS/],
      [{ SVC_PLANS: plans, SVC_DEFAULT_PLAN: "gold" }, /SVC_DEFAULT_PLAN: SVC_PLANS has no plan 'gold' \(free, team\)/],
      [{ SVC_DEFAULT_PLAN: "free" }, /SVC_DEFAULT_PLAN names a plan of SVC_PLANS, which is unset/],
    ] as const)
      expect(() => loadConfig(env), JSON.stringify(env)).toThrow(message);
  });

  it("names the plan, the cap, where the cap comes from and how to get more in the 429", () => {
    const cap = { account: "acme", plan: "free", session_cap: 2, own: false };
    const fromPlans = capRefusal(cap, "SVC_PLANS", 2);
    expect(fromPlans).toMatchObject({ status: 429, code: "SESSION_CAP_REACHED" });
    expect(fromPlans.details).toEqual({ limit: 2, current: 2, plan: "free" });
    expect(fromPlans.message).toContain(
      "account 'acme' on plan 'free' may run 2 sessions at once (the plan's session_cap in SVC_PLANS) and 2 are starting",
    );
    expect(fromPlans.message).toContain("ask the installation's administrator for a larger plan");
    const single = capRefusal({ ...cap, plan: SINGLE_PLAN }, "SVC_SESSION_CAP", 3).message;
    expect(single).toContain("(set by SVC_SESSION_CAP)");
    expect(single).toContain("svc self-host env set SVC_SESSION_CAP=<n>");
    expect(capRefusal({ ...cap, own: true }, "SVC_PLANS", 2).message).toContain("(this account's own cap");
  });
});
