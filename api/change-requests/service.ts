import { randomUUID } from "node:crypto";
import type {
  ChangeRequest,
  ChangeRequestRecord,
  CreateChangeRequestBody,
  Diff,
  ListChangeRequestsQuery,
  MergePreview,
} from "../../protocol/change-request.ts";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { Project } from "../../protocol/project.ts";
import type { ReviewState } from "../checks/review-state.ts";
import { apiError } from "../errors.ts";
import type { Events } from "../events.ts";
import { refuseDefaultBranchLookalike } from "../git/branch-names.ts";
import { computeDiff } from "../git/diff.ts";
import { commitMerge } from "../git/merge.ts";
import { computePreview, mergeTree, type PreviewCache } from "../git/merge-preview.ts";
import { readBranchTips } from "../git/refs.ts";
import type { Repositories } from "../git/repositories.ts";
import { RepoUnavailableError } from "../git/repositories.ts";
import { isUuid } from "../projects/store.ts";
import { mergeTicketRef } from "./merge-intents.ts";
import { beingMerged, createMergeRepair } from "./merge-repair.ts";
import type { ChangeRequestStore } from "./store.ts";

export type ChangeRequestDeps = {
  store: ChangeRequestStore;
  repos: Repositories;
  previews: PreviewCache;
  /**
   * `change-request.changed` after a CR was opened, closed or merged (its base branch moved): the trigger
   * scheduler re-reads the manifest, the chat thread of its session hears of it.
   */
  events: Events;
  /** This API process among those sharing the database (orchestrator/cluster.ts): the owner of its merge intents. */
  instanceId: string;
  /** Checks, approvals and mergeability: what the CR JSON shows and what the merge gate requires (api/checks/). */
  review: ReviewState;
};

const MERGE_ATTEMPTS = 3;

/** SPEC rule 5: open and closed CRs reflect what is pushed to their head branch; a merged one is frozen at its merge. */
const followsBranches = (cr: ChangeRequestRecord) => cr.status !== "merged";

/** `headSha`: the head the person reviewed; the merge lands exactly that commit or nothing. */
export type MergeOptions = { message?: string; headSha?: string };

export function createChangeRequestService(deps: ChangeRequestDeps) {
  const { store, repos, previews } = deps;
  // Merge, close and reopen of one project's CRs run one at a time in this process; the ref compare-and-swap
  // keeps commits safe even across processes.
  const withProjectLock = createKeyedMutex();
  const repair = createMergeRepair({ ...deps, withProjectLock, load });
  const { settleLeftover, otherMergeEnds } = repair;

  async function load(project: Project, ref: string): Promise<ChangeRequestRecord> {
    const number = /^#?(\d{1,9})$/.exec(ref);
    const cr = number
      ? await store.byNumber(project.id, Number(number[1]))
      : isUuid(ref)
        ? await store.byId(project.id, ref)
        : undefined;
    if (!cr) throw apiError("CR_NOT_FOUND", `change request ${ref} not found in this project`);
    return cr;
  }

  /**
   * SPEC refresh rules 4 and 5: an open CR follows both live branches, a closed one its head branch; a merged one
   * keeps what it merged. An unreachable repo or a missing branch is skipped.
   */
  async function refresh(project: Project, crs: ChangeRequestRecord[]): Promise<ChangeRequestRecord[]> {
    if (!crs.some(followsBranches)) return crs;
    const tips = await repos.tips(project);
    if (!tips) return crs;
    return Promise.all(
      crs.map(async (cr) => {
        if (!followsBranches(cr)) return cr;
        const head = tips.get(cr.head_ref);
        // A closed CR's base stays as it was when closed: the base moves with every merge, and closed CRs pile up,
        // so following it would rewrite each of them on the next list after every merge.
        const base = cr.status === "closed" ? (cr.base_commit_sha ?? tips.get(cr.base_ref)) : tips.get(cr.base_ref);
        if (!head || !base || (head === cr.head_commit_sha && base === cr.base_commit_sha)) return cr;
        return (await store.refreshShas(cr.cr_id, head, base)) ?? cr;
      }),
    );
  }

  /** The commits a diff or preview compares: live branches for open and closed CRs, captured SHAs once merged. */
  async function comparedCommits(
    project: Project,
    cr: ChangeRequestRecord,
  ): Promise<{ dir: string; base: string; head: string }> {
    let dir: string;
    try {
      dir = await repos.open(project);
    } catch (err) {
      if (err instanceof RepoUnavailableError)
        throw apiError("REPO_UNAVAILABLE", "the project's repository cannot be reached");
      throw err;
    }
    if (followsBranches(cr)) {
      const tips = await repos.tips(project);
      const base = tips?.get(cr.base_ref) ?? cr.base_commit_sha;
      const head = tips?.get(cr.head_ref) ?? cr.head_commit_sha;
      if (base && head) return { dir, base, head };
    } else if (cr.base_commit_sha && cr.head_commit_sha) {
      return { dir, base: cr.base_commit_sha, head: cr.head_commit_sha };
    }
    throw apiError("BRANCH_NOT_FOUND", `branch '${cr.head_ref}' or '${cr.base_ref}' no longer exists`);
  }

  async function mergeOnce(project: Project, cr: ChangeRequestRecord, userId: string, options: MergeOptions) {
    const dir = await repos.open(project, 0);
    const tips = await readBranchTips(dir);
    const base = tips.get(cr.base_ref);
    const head = tips.get(cr.head_ref);
    if (!base || !head) {
      throw apiError("MERGE_REJECTED", "Merge failed", {
        reason: `branch '${!head ? cr.head_ref : cr.base_ref}' not found`,
      });
    }
    if (options.headSha && head !== options.headSha) {
      throw apiError(
        "HEAD_MOVED",
        `the head of CR #${cr.number} moved to ${head.slice(0, 12)} since you saw ${options.headSha.slice(0, 12)}: ` +
          `review it again (svc cr show ${cr.number}) before merging`,
        { head_sha: head },
      );
    }
    await deps.review.requirePassed(project, cr, head, base);
    await deps.review.requireApproved(project, cr, head);
    const preview = await computePreview(dir, base, head);
    if (preview.merge_base === null) {
      throw apiError("MERGE_REJECTED", "Merge failed", { reason: "the branches have unrelated histories" });
    }
    if (!preview.can_merge) throw apiError("MERGE_CONFLICT", "Merge failed", { conflicts: preview.conflicts });

    let target: string;
    if (preview.is_up_to_date) {
      // Everything on head is already on base: nothing to write, the CR is simply done.
      target = base;
    } else if (preview.can_fast_forward) {
      target = head;
    } else {
      const merged = await mergeTree(dir, base, head);
      if (!merged.clean) throw apiError("MERGE_CONFLICT", "Merge failed", { conflicts: merged.conflicts });
      target = await commitMerge(
        dir,
        merged.tree,
        base,
        head,
        options.message ?? `Merge CR #${cr.number}: ${cr.title}`,
      );
    }
    const notOpen = () => apiError("CR_NOT_OPEN", `CR #${cr.number} was merged or closed meanwhile`);
    if (target === base) {
      // Nothing moves: recording it is the whole merge.
      const merged = await store.markMerged(cr.cr_id, {
        mergedBy: userId,
        mergeCommitSha: target,
        baseSha: base,
        headSha: head,
      });
      if (!merged) throw notOpen();
      return merged;
    }
    // Crash safety: the intent is written before the base moves and removed with the record, in one transaction.
    // A process killed between the two leaves it for the repair, which reads the base branch to tell which happened,
    // after voiding the merge's ticket: without it the move can no longer happen (a git of the dead process that is
    // still running included), so what the branch says then is final.
    const intentId = randomUUID();
    const ticket = mergeTicketRef(intentId);
    await repos.issueTicket(project, ticket, target);
    const intent = await store.beginMerge({
      intent_id: intentId,
      cr_id: cr.cr_id,
      project_id: project.id,
      base_ref: cr.base_ref,
      target_sha: target,
      base_sha: base,
      head_sha: head,
      merged_by: userId,
      instance_id: deps.instanceId,
    });
    if (intent === "not-open" || "existing" in intent) await repos.voidTicket(project, ticket);
    if (intent === "not-open") throw notOpen();
    if ("existing" in intent) {
      // Another process began merging it since this one looked: once that ends, the next attempt sees the outcome.
      if (!(await otherMergeEnds(intent.existing))) throw beingMerged(cr);
      return undefined;
    }
    // An update that throws (a push cut off midway) may or may not have moved the branch: its intent stays for the
    // repair to settle against the branch.
    if (!(await repos.updateBranch(project, cr.base_ref, target, base, { ticket }))) {
      await repos.voidTicket(project, ticket);
      await store.dropIntent(intent);
      return undefined;
    }
    repos.invalidate(project);
    // The CR row was locked open when the intent was written, and close refuses while an intent exists.
    const merged = await store.finishMerge(intent);
    if (!merged) throw notOpen();
    return merged;
  }

  const present = async (project: Project, cr: ChangeRequestRecord): Promise<ChangeRequest> =>
    (await deps.review.present(project, [cr]))[0]!;

  return {
    load,

    repairMerges: repair.repairMerges,

    startMergeRepair: repair.startMergeRepair,

    async list(project: Project, query: ListChangeRequestsQuery): Promise<ChangeRequest[]> {
      return deps.review.present(project, await refresh(project, await store.list(project.id, query.status)));
    },

    /** The runs of the CR's checks on its current head and base. */
    async checks(project: Project, ref: string) {
      const [cr] = await refresh(project, [await load(project, ref)]);
      return deps.review.current(project, cr!);
    },

    /** The open CRs as stored, their SHAs refreshed. */
    openRecords: async (project: Project) => refresh(project, await store.list(project.id, "open")),

    /** The CR as stored, its SHAs refreshed: what the checks and the merge queue work from. */
    async record(project: Project, ref: string): Promise<ChangeRequestRecord> {
      const [cr] = await refresh(project, [await load(project, ref)]);
      return cr!;
    },

    async get(project: Project, ref: string): Promise<ChangeRequest> {
      const [cr] = await refresh(project, [await load(project, ref)]);
      return present(project, cr!);
    },

    /**
     * Puts an open CR in its base's merge queue, to merge as `userId` once its checks pass and nothing conflicts
     * (api/checks/merge-queue.ts), or (`on` false) takes it out.
     */
    async setAutoMerge(project: Project, ref: string, userId: string, on: boolean): Promise<ChangeRequest> {
      const cr = await load(project, ref);
      if (cr.status !== "open")
        throw apiError("CR_NOT_OPEN", `CR #${cr.number} is ${cr.status}; only an open CR can be queued to merge`);
      const queued = await store.setAutoMerge(cr.cr_id, on ? { userId } : { note: null });
      if (!queued) throw apiError("CR_NOT_OPEN", `CR #${cr.number} was merged or closed meanwhile`);
      if (on) deps.events.emit("change-request.changed", { project, cr: queued, change: "queued" });
      return present(project, queued);
    },

    async create(project: Project, body: CreateChangeRequestBody, userId: string): Promise<ChangeRequest> {
      const baseRef = body.base_ref ?? project.default_branch;
      refuseDefaultBranchLookalike(project, body.head_ref, "head_ref");
      refuseDefaultBranchLookalike(project, baseRef, "base_ref");
      if (body.head_ref === baseRef) {
        throw apiError("SAME_REF", `head_ref and base_ref are both '${baseRef}'`, { field: "head_ref" });
      }
      // Fresh tips: an agent typically pushes and opens the CR in the same breath.
      const tips = await repos.tips(project, 0);
      const headSha = tips?.get(body.head_ref) ?? null;
      const baseSha = tips?.get(baseRef) ?? null;
      if (tips && !headSha)
        throw apiError("BRANCH_NOT_FOUND", `branch '${body.head_ref}' does not exist`, { field: "head_ref" });
      if (tips && !baseSha)
        throw apiError("BRANCH_NOT_FOUND", `branch '${baseRef}' does not exist`, { field: "base_ref" });
      const created = await store.create({
        accountId: project.account_id,
        projectId: project.id,
        title: body.title,
        description: body.description ?? "",
        baseRef,
        headRef: body.head_ref,
        headSha,
        baseSha,
        sessionId: body.session_id ?? null,
        createdBy: userId,
        metadata: body.metadata ?? {},
      });
      deps.events.emit("change-request.changed", { project, cr: created, change: "created" });
      return present(project, created);
    },

    async edit(project: Project, ref: string, title?: string, description?: string): Promise<ChangeRequest> {
      const cr = await load(project, ref);
      return present(project, (await store.edit(cr.cr_id, title, description))!);
    },

    close: async (project: Project, ref: string, userId: string) =>
      present(
        project,
        await withProjectLock(project.id, async (): Promise<ChangeRequestRecord> => {
          let cr = await load(project, ref);
          // A second look when another process merged, closed or began merging it between the first and the close.
          for (let attempt = 0; attempt < 2; attempt++) {
            cr = await load(project, cr.cr_id);
            if (cr.status === "open") cr = await settleLeftover(project, cr);
            if (cr.status === "merged") throw apiError("CR_MERGED", `CR #${cr.number} is merged and cannot be closed`);
            if (cr.status === "closed") return cr;
            const closed = await store.close(cr.cr_id, userId);
            if (closed && closed !== "merging") {
              deps.events.emit("change-request.changed", { project, cr: closed, change: "closed" });
              return closed;
            }
          }
          throw beingMerged(cr);
        }),
      ),

    reopen: async (project: Project, ref: string) =>
      present(
        project,
        await withProjectLock(project.id, async (): Promise<ChangeRequestRecord> => {
          const cr = await load(project, ref);
          if (cr.status !== "closed") {
            throw apiError("CR_NOT_CLOSED", `CR #${cr.number} is ${cr.status}; only a closed CR can be reopened`);
          }
          const [reopened] = await refresh(project, [(await store.reopen(cr.cr_id))!]);
          return reopened!;
        }),
      ),

    merge: async (project: Project, ref: string, userId: string, options: MergeOptions = {}) =>
      present(
        project,
        await withProjectLock(project.id, async (): Promise<ChangeRequestRecord> => {
          let cr = await load(project, ref);
          if (cr.status === "open") cr = await settleLeftover(project, cr);
          if (cr.status !== "open")
            throw apiError("CR_NOT_OPEN", `CR #${cr.number} is ${cr.status}; only an open CR can be merged`);
          for (let attempt = 0; attempt < MERGE_ATTEMPTS; attempt++) {
            try {
              const merged = await mergeOnce(project, cr, userId, options);
              if (merged) {
                deps.events.emit("change-request.changed", { project, cr: merged, change: "merged" });
                return merged;
              }
            } catch (err) {
              if (err instanceof RepoUnavailableError)
                throw apiError("REPO_UNAVAILABLE", "the project's repository cannot be reached");
              throw err;
            }
          }
          throw apiError("MERGE_REJECTED", "Merge failed", { reason: `'${cr.base_ref}' kept moving; try again` });
        }),
      ),

    async preview(project: Project, ref: string): Promise<MergePreview> {
      const cr = await load(project, ref);
      const { dir, base, head } = await comparedCommits(project, cr);
      return previews.get(dir, base, head);
    },

    async diff(project: Project, ref: string): Promise<Diff> {
      const cr = await load(project, ref);
      const { dir, base, head } = await comparedCommits(project, cr);
      const preview = await previews.get(dir, base, head);
      return computeDiff(dir, base, head, preview.merge_base !== null);
    },
  };
}

export type ChangeRequestService = ReturnType<typeof createChangeRequestService>;
