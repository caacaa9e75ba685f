import { z } from "zod";

/** A plan's name, as SVC_PLANS keys and accounts name them. */
export const PlanName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,39}$/, "must be 1-40 lowercase letters, digits, '-' or '_' (first a letter or digit)");

export const Plan = z.object({ session_cap: z.number().int().min(1).max(10_000) }).strict();
export type Plan = z.infer<typeof Plan>;

/** SVC_PLANS: the stack's plans by name, e.g. `{"free":{"session_cap":2},"team":{"session_cap":10}}`. */
export const Plans = z.record(PlanName, Plan).refine((plans) => Object.keys(plans).length > 0, "must name a plan");
export type Plans = z.infer<typeof Plans>;

/** `GET /v1/accounts/plan`: the active account's plan, the cap it runs under and how many sessions hold a slot. */
export const AccountPlan = z.object({
  plan: z.string(),
  session_cap: z.number().int(),
  /** Starting or running sessions, a CR's check sessions included: what the cap counts. */
  sessions_live: z.number().int(),
});
export type AccountPlan = z.infer<typeof AccountPlan>;

/**
 * `PUT /v1/admin/accounts/{account}/plan` (the installation's administrator): `plan` null puts the account back on
 * the stack's default plan, `session_cap` null drops its own cap (the plan's applies).
 */
export const SetAccountPlanBody = z
  .object({ plan: PlanName.nullable().optional(), session_cap: Plan.shape.session_cap.nullable().optional() })
  .strict();
export type SetAccountPlanBody = z.infer<typeof SetAccountPlanBody>;
