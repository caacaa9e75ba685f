import type {
  ChangeRequest,
  CreateChangeRequestBody,
  Diff,
  ListChangeRequestsQuery,
  MergePreview,
} from "../../protocol/change-request.ts";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { Project } from "../../protocol/project.ts";
import { apiError } from "../errors.ts";
import { refuseDefaultBranchLookalike } from "../git/branch-names.ts";
import { computeDiff } from "../git/diff.ts";
import { commitMerge } from "../git/merge.ts";
import { computePreview, mergeTree, type PreviewCache } from "../git/merge-preview.ts";
import { readBranchTips } from "../git/refs.ts";
import type { Repositories } from "../git/repositories.ts";
import { RepoUnavailableError } from "../git/repositories.ts";
import { isUuid } from "../projects/store.ts";
import type { ChangeRequestStore } from "./store.ts";

export type ChangeRequestDeps = {
  store: ChangeRequestStore;
  repos: Repositories;
  previews: PreviewCache;
  /** Told after a CR merged (its base branch moved): e.g. the trigger scheduler re-reads the manifest. */
  onMerged?: (project: Project, cr: ChangeRequest) => void;
  /** Told after a CR was opened or closed (e.g. the chat thread of its session hears of it). */
  onCreated?: (project: Project, cr: ChangeRequest) => void;
  onClosed?: (project: Project, cr: ChangeRequest) => void;
};

const MERGE_ATTEMPTS = 3;

/** `headSha`: the head the person reviewed; the merge lands exactly that commit or nothing. */
export type MergeOptions = { message?: string; headSha?: string };

export function createChangeRequestService(deps: ChangeRequestDeps) {
  const { store, repos, previews } = deps;
  // Merge, close and reopen of one project's CRs run one at a time in this process; the ref compare-and-swap
  // keeps commits safe even across processes.
  const withProjectLock = createKeyedMutex();

  async function load(project: Project, ref: string): Promise<ChangeRequest> {
    const number = /^#?(\d{1,9})$/.exec(ref);
    const cr = number
      ? await store.byNumber(project.id, Number(number[1]))
      : isUuid(ref)
        ? await store.byId(project.id, ref)
        : undefined;
    if (!cr) throw apiError("CR_NOT_FOUND", `change request ${ref} not found in this project`);
    return cr;
  }

  /** SPEC refresh rule: open CRs follow their live branches; an unreachable repo or a missing branch is skipped. */
  async function refresh(project: Project, crs: ChangeRequest[]): Promise<ChangeRequest[]> {
    if (!crs.some((cr) => cr.status === "open")) return crs;
    const tips = await repos.tips(project);
    if (!tips) return crs;
    return Promise.all(
      crs.map(async (cr) => {
        if (cr.status !== "open") return cr;
        const head = tips.get(cr.head_ref);
        const base = tips.get(cr.base_ref);
        if (!head || !base || (head === cr.head_commit_sha && base === cr.base_commit_sha)) return cr;
        return (await store.refreshShas(cr.cr_id, head, base)) ?? cr;
      }),
    );
  }

  /** The commits a diff or preview compares: live branches for open and closed CRs, captured SHAs once merged. */
  async function comparedCommits(
    project: Project,
    cr: ChangeRequest,
  ): Promise<{ dir: string; base: string; head: string }> {
    let dir: string;
    try {
      dir = await repos.open(project);
    } catch (err) {
      if (err instanceof RepoUnavailableError)
        throw apiError("REPO_UNAVAILABLE", "the project's repository cannot be reached");
      throw err;
    }
    if (cr.status !== "merged") {
      const tips = await repos.tips(project);
      const base = tips?.get(cr.base_ref) ?? cr.base_commit_sha;
      const head = tips?.get(cr.head_ref) ?? cr.head_commit_sha;
      if (base && head) return { dir, base, head };
    } else if (cr.base_commit_sha && cr.head_commit_sha) {
      return { dir, base: cr.base_commit_sha, head: cr.head_commit_sha };
    }
    throw apiError("BRANCH_NOT_FOUND", `branch '${cr.head_ref}' or '${cr.base_ref}' no longer exists`);
  }

  async function mergeOnce(project: Project, cr: ChangeRequest, userId: string, options: MergeOptions) {
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
    if (target !== base && !(await repos.updateBranch(project, cr.base_ref, target, base))) return undefined;
    repos.invalidate(project);
    const merged = await store.markMerged(cr.cr_id, {
      mergedBy: userId,
      mergeCommitSha: target,
      baseSha: base,
      headSha: head,
    });
    // Another API process merged or closed it meanwhile: its record stands.
    if (!merged) throw apiError("CR_NOT_OPEN", `CR #${cr.number} was merged or closed meanwhile`);
    return merged;
  }

  return {
    load,

    async list(project: Project, query: ListChangeRequestsQuery): Promise<ChangeRequest[]> {
      return refresh(project, await store.list(project.id, query.status));
    },

    async get(project: Project, ref: string): Promise<ChangeRequest> {
      const [cr] = await refresh(project, [await load(project, ref)]);
      return cr!;
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
      deps.onCreated?.(project, created);
      return created;
    },

    async edit(project: Project, ref: string, title?: string, description?: string): Promise<ChangeRequest> {
      const cr = await load(project, ref);
      return (await store.edit(cr.cr_id, title, description))!;
    },

    close: (project: Project, ref: string, userId: string) =>
      withProjectLock(project.id, async () => {
        const cr = await load(project, ref);
        if (cr.status === "merged") throw apiError("CR_MERGED", `CR #${cr.number} is merged and cannot be closed`);
        if (cr.status === "closed") return cr;
        const closed = (await store.close(cr.cr_id, userId))!;
        deps.onClosed?.(project, closed);
        return closed;
      }),

    reopen: (project: Project, ref: string) =>
      withProjectLock(project.id, async () => {
        const cr = await load(project, ref);
        if (cr.status !== "closed") {
          throw apiError("CR_NOT_CLOSED", `CR #${cr.number} is ${cr.status}; only a closed CR can be reopened`);
        }
        const [reopened] = await refresh(project, [(await store.reopen(cr.cr_id))!]);
        return reopened!;
      }),

    merge: (project: Project, ref: string, userId: string, options: MergeOptions = {}) =>
      withProjectLock(project.id, async () => {
        const cr = await load(project, ref);
        if (cr.status !== "open")
          throw apiError("CR_NOT_OPEN", `CR #${cr.number} is ${cr.status}; only an open CR can be merged`);
        for (let attempt = 0; attempt < MERGE_ATTEMPTS; attempt++) {
          try {
            const merged = await mergeOnce(project, cr, userId, options);
            if (merged) {
              deps.onMerged?.(project, merged);
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
