import { z } from "zod";

/** The longest span one usage query covers, in days. */
export const USAGE_MAX_DAYS = 366;
/** The span without `from`: this many days up to `to` (default today), both included. */
export const USAGE_DEFAULT_DAYS = 30;

const Day = z.iso.date();

/** `GET /v1/accounts/usage?from=&to=`: UTC days, both included. */
export const UsageQuery = z
  .object({ from: Day.optional(), to: Day.optional() })
  .strict()
  .refine((q) => !q.from || !q.to || q.from <= q.to, { message: "from must not be after to", path: ["from"] });
export type UsageQuery = z.infer<typeof UsageQuery>;

/**
 * One project's day. Agent sessions (people's, triggers', review feedback's) and the sessions a CR's checks run in
 * are counted apart: `sessions`/`sandbox_seconds` the first, `check_sessions`/`check_sandbox_seconds` the second.
 * Sandbox-seconds are the time a sandbox existed (provisioning to stop) within that UTC day; sessions, those created
 * that day.
 */
export const UsageDay = z.object({
  date: Day,
  project_id: z.uuid(),
  project: z.string(),
  sessions: z.number().int(),
  sandbox_seconds: z.number().int(),
  check_sessions: z.number().int(),
  check_sandbox_seconds: z.number().int(),
});
export type UsageDay = z.infer<typeof UsageDay>;

export const UsageTotals = UsageDay.pick({
  sessions: true,
  sandbox_seconds: true,
  check_sessions: true,
  check_sandbox_seconds: true,
});
export type UsageTotals = z.infer<typeof UsageTotals>;

/** Days with any use only, oldest first, projects by slug within a day. */
export const Usage = z.object({ from: Day, to: Day, days: z.array(UsageDay), totals: UsageTotals });
export type Usage = z.infer<typeof Usage>;
