import { z } from "zod";

/** One `[[checks]]` entry of the default branch's svc.toml: a command every new head of an open CR must pass. */
export const CheckSpec = z
  .object({
    name: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, "letters, digits, ' ', '.', '_' and '-' only"),
    /** Run by `sh -c` in /workspace, at the commit the merge would create. */
    run: z.string().refine((r) => r.trim().length > 0, "give the command the check runs"),
    /** Seconds before the check is stopped and fails. */
    timeout: z
      .number()
      .int()
      .min(1, "a timeout of at least 1 second")
      .max(6 * 3600)
      .default(600),
  })
  .strict();
export type CheckSpec = z.infer<typeof CheckSpec>;

export const DEFAULT_MAX_FIX_ROUNDS = 3;
/** More approvals than a team has members would block every merge: a typo, refused where it is written. */
const MAX_REQUIRED_APPROVALS = 20;

/** `[review]` of the default branch's svc.toml. */
export const ReviewSection = z
  .object({
    /** A failed check's log tail goes to the CR's origin session as a prompt. */
    fix_checks: z.boolean().default(false),
    /** How many times a CR's failed checks go back to its agent. */
    max_fix_rounds: z.number().int().min(1).max(20).default(DEFAULT_MAX_FIX_ROUNDS),
    /** Approvals of a CR's current head, by members other than its author, before it merges (by hand or queued). */
    required_approvals: z
      .number()
      .int("a whole number of approvals")
      .min(0, "0 or more approvals")
      .max(MAX_REQUIRED_APPROVALS, `at most ${MAX_REQUIRED_APPROVALS} approvals`)
      .default(0),
  })
  .loose();
export type ReviewSection = z.infer<typeof ReviewSection>;

export const CheckStatus = z.enum(["queued", "running", "passed", "failed", "error"]);
export type CheckStatus = z.infer<typeof CheckStatus>;
/** The statuses a check ends in. */
export const FINISHED_CHECK_STATUSES: readonly CheckStatus[] = ["passed", "failed", "error"];

/** A CR's checks of its current head and base, in one word. */
export const ChecksStatus = z.enum(["none", "pending", "passed", "failed"]);
export type ChecksStatus = z.infer<typeof ChecksStatus>;

/** One check's run on one (head, base) of a CR, as the API shows it. */
export const CheckRun = z.object({
  name: z.string(),
  status: CheckStatus,
  head_sha: z.string(),
  base_sha: z.string(),
  /** The commit it ran on: the head merged into the base, or the head alone when they conflict. */
  commit_sha: z.string().nullable(),
  exit_code: z.number().int().nullable(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  log: z.string(),
});
export type CheckRun = z.infer<typeof CheckRun>;

/** `GET …/change-requests/{n}/checks`: the runs of the CR's current head and base, one per check. */
export const CheckRunList = z.array(CheckRun);

/** The one word for a set of runs of the checks the manifest names (`expected`). */
export function summarizeChecks(expected: readonly string[], runs: readonly Pick<CheckRun, "name" | "status">[]) {
  if (expected.length === 0) return "none" satisfies ChecksStatus;
  const byName = new Map(runs.map((r) => [r.name, r.status]));
  const statuses = expected.map((name) => byName.get(name));
  if (statuses.some((s) => s === "failed" || s === "error")) return "failed" satisfies ChecksStatus;
  if (statuses.every((s) => s === "passed")) return "passed" satisfies ChecksStatus;
  return "pending" satisfies ChecksStatus;
}
