import type { ChangeRequest, ChangeRequestRecord } from "../../protocol/change-request.ts";
import { type CheckSpec, type ChecksStatus, summarizeChecks } from "../../protocol/cr-check.ts";
import type { Project } from "../../protocol/project.ts";
import type { ApprovalStore } from "../change-requests/approvals-store.ts";
import { apiError } from "../errors.ts";
import type { PreviewCache } from "../git/merge-preview.ts";
import type { Repositories } from "../git/repositories.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import type { CheckStore, StoredRun } from "./store.ts";

export type ReviewStateDeps = {
  checks: CheckStore;
  approvals: Pick<ApprovalStore, "counted" | "shownCounts">;
  manifests: Pick<ManifestReader, "read">;
  repos: Pick<Repositories, "open">;
  previews: PreviewCache;
};

/**
 * What a CR's review stands at: its checks of the current head and base (named by the default branch's
 * `[[checks]]`, so a CR cannot turn its own off), its approvals of the current head (as many as the default
 * branch's `[review] required_approvals`), and whether a merge would land it now. One home for the rule the merge
 * gate, the merge queue and the CR JSON all apply.
 */
export function createReviewState(deps: ReviewStateDeps) {
  const checksOf = async (project: Project): Promise<CheckSpec[]> =>
    (await deps.manifests.read(project)).manifest.checks;
  const requiredApprovals = async (project: Project): Promise<number> =>
    (await deps.manifests.read(project)).manifest.review.required_approvals;

  /** The runs of each CR's current (head, base), by CR id. */
  async function runsOf(crs: readonly ChangeRequestRecord[]): Promise<Map<string, StoredRun[]>> {
    const pairs = crs.flatMap((cr) =>
      cr.head_commit_sha && cr.base_commit_sha
        ? [{ crId: cr.cr_id, head: cr.head_commit_sha, base: cr.base_commit_sha }]
        : [],
    );
    const byCr = new Map<string, StoredRun[]>();
    for (const run of await deps.checks.forHeads(pairs)) byCr.set(run.cr_id, [...(byCr.get(run.cr_id) ?? []), run]);
    return byCr;
  }

  async function mergesCleanly(project: Project, cr: ChangeRequestRecord): Promise<boolean> {
    if (!cr.head_commit_sha || !cr.base_commit_sha) return false;
    const preview = await deps.previews.get(await deps.repos.open(project), cr.base_commit_sha, cr.head_commit_sha);
    return preview.can_merge;
  }

  return {
    checksOf,

    /** The CRs as the API shows them: their checks summed up, their approvals counted, and mergeable. */
    async present(project: Project, crs: readonly ChangeRequestRecord[]): Promise<ChangeRequest[]> {
      if (crs.length === 0) return [];
      const { manifest } = await deps.manifests.read(project);
      const names = manifest.checks.map((c) => c.name);
      const required_approvals = manifest.review.required_approvals;
      const [runs, approved] = await Promise.all([
        // No checks named: nothing to read (most CR reads of most projects).
        names.length ? runsOf(crs.filter((cr) => cr.status === "open")) : new Map<string, StoredRun[]>(),
        deps.approvals.shownCounts(crs),
      ]);
      return Promise.all(
        crs.map(async (cr) => {
          const checks_status: ChecksStatus =
            cr.status === "open" ? summarizeChecks(names, runs.get(cr.cr_id) ?? []) : "none";
          const approvals = approved.get(cr.cr_id) ?? 0;
          const mergeable =
            cr.status === "open" &&
            (checks_status === "none" || checks_status === "passed") &&
            approvals >= required_approvals &&
            (await mergesCleanly(project, cr).catch(() => false));
          return { ...cr, checks_status, approvals, required_approvals, mergeable };
        }),
      );
    },

    /** The runs of a CR's current head and base, one per check the manifest names, in its order. */
    async current(project: Project, cr: ChangeRequestRecord): Promise<StoredRun[]> {
      const names = (await checksOf(project)).map((c) => c.name);
      const runs = (await runsOf([cr])).get(cr.cr_id) ?? [];
      return names.flatMap((name) => runs.filter((r) => r.name === name));
    },

    /**
     * The merge gate: every check of the default branch's manifest passed on exactly this head and base, or
     * 409 CHECKS_NOT_PASSED naming those that did not.
     */
    async requirePassed(project: Project, cr: ChangeRequestRecord, head: string, base: string): Promise<void> {
      const names = (await checksOf(project)).map((c) => c.name);
      if (names.length === 0) return;
      const runs = (await runsOf([{ ...cr, head_commit_sha: head, base_commit_sha: base }])).get(cr.cr_id) ?? [];
      const status = new Map(runs.map((r) => [r.name, r.status]));
      const waiting = names.filter((n) => status.get(n) !== "passed");
      if (waiting.length === 0) return;
      const described = waiting.map((n) => `${n} (${status.get(n) ?? "not run"})`).join(", ");
      throw apiError(
        "CHECKS_NOT_PASSED",
        `CR #${cr.number} cannot merge until its checks pass on head ${head.slice(0, 12)}: ${described}; ` +
          `see 'svc cr checks ${cr.number}', or queue it with 'svc cr merge ${cr.number} --auto'`,
        { checks: waiting.map((name) => ({ name, status: status.get(name) ?? "not run" })) },
      );
    },

    /**
     * The merge gate's other half: at least `[review] required_approvals` approvals of exactly this head, or 409
     * APPROVAL_REQUIRED saying how many it needs and has. Approvals of an earlier head do not count.
     */
    async requireApproved(project: Project, cr: ChangeRequestRecord, head: string): Promise<void> {
      const required = await requiredApprovals(project);
      if (required === 0) return;
      const given = (await deps.approvals.counted([{ ...cr, head_commit_sha: head }])).get(cr.cr_id) ?? 0;
      if (given >= required) return;
      throw apiError(
        "APPROVAL_REQUIRED",
        `CR #${cr.number} needs ${required} ${required === 1 ? "approval" : "approvals"} of head ${head.slice(0, 12)} ` +
          `to merge and has ${given}: a member other than its author approves it with 'svc cr approve ${cr.number}'`,
        { required, given },
      );
    },
  };
}

export type ReviewState = ReturnType<typeof createReviewState>;
