/** A merge's intent as stored (table `cr_merge_intents`): what the merge was about to write, by whom. */
export type MergeIntent = {
  cr_id: string;
  intent_id: string;
  project_id: string;
  base_ref: string;
  target_sha: string;
  base_sha: string;
  head_sha: string;
  merged_by: string;
  instance_id: string;
  created_at: Date;
};

/** The ref a merge needs to move its base branch (api/git/repositories.ts `issueTicket`): under refs/svc/, no push writes it. */
export const mergeTicketRef = (intentId: string) => `refs/svc/merge-tickets/${intentId}`;

/**
 * What to do with an intent found in the table:
 * - `wait`: its merge may still be under way (its process lives), or the base branch cannot be read now;
 * - `record`: the base branch holds the target, so the merge happened: the CR becomes merged with it;
 * - `drop`: the base branch does not hold the target (the move never happened): the intent goes, the CR stays.
 */
export type IntentVerdict = "wait" | "record" | "drop";

export type IntentFacts = {
  /** Whether the process that wrote the intent may still be merging (always false for this process's own). */
  ownerMayBeMerging: boolean;
  /**
   * The base branch as read now: missing (the branch is gone), `unreadable` (the repository cannot be reached, or
   * the merge's ticket cannot be voided yet), or whether its tip equals the target or has it as an ancestor.
   */
  base: "missing" | "unreadable" | { holdsTarget: boolean };
};

export function intentVerdict(facts: IntentFacts): IntentVerdict {
  if (facts.ownerMayBeMerging || facts.base === "unreadable") return "wait";
  if (facts.base === "missing") return "drop";
  return facts.base.holdsTarget ? "record" : "drop";
}
