import { describe, expect, it } from "vitest";
import type { ChangeRequest, ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { Project } from "../../protocol/project.ts";
import { apiError } from "../errors.ts";
import { advanceMergeQueue, type MergeQueueDeps } from "./merge-queue.ts";
import type { ReviewState } from "./review-state.ts";

const PROJECT = { id: "p1" } as Project;

type Shown = Pick<ChangeRequest, "checks_status" | "approvals" | "required_approvals" | "mergeable">;

/** Queued CRs on one base, in queue order, each shown as given; what the queue did to them. */
function queue(crs: (Shown & { id: string; mergeFails?: Error })[]) {
  const merged: string[] = [];
  const letGo: { id: string; note: string | null }[] = [];
  const record = (id: string) =>
    ({
      cr_id: id,
      number: crs.findIndex((c) => c.id === id) + 1,
      status: "open",
      base_ref: "main",
    }) as ChangeRequestRecord;
  const deps: MergeQueueDeps = {
    crStore: {
      autoMergeQueue: async () =>
        crs.map((c) => ({ ...record(c.id), project_id: PROJECT.id, auto_merge_by: "u1" })) as never,
      setAutoMerge: async (id, change) => {
        letGo.push({ id, note: "note" in change ? change.note : null });
        return undefined;
      },
    },
    changeRequests: {
      record: async (_project, id) => record(id),
      merge: async (_project, id) => {
        const failure = crs.find((c) => c.id === id)?.mergeFails;
        if (failure) throw failure;
        merged.push(id);
        return record(id) as never;
      },
    },
    recordMerge: async () => {},
    review: {
      present: async (_project: Project, records: readonly ChangeRequestRecord[]) =>
        records.map((r) => ({ ...r, ...crs.find((c) => c.id === r.cr_id)! })),
      current: async () => [],
    } as unknown as ReviewState,
    projects: { byId: async () => PROJECT },
    log: () => {},
  };
  return { run: () => advanceMergeQueue(deps), merged, letGo };
}

const ready: Shown = { checks_status: "passed", approvals: 1, required_approvals: 1, mergeable: true };
const unapproved: Shown = { checks_status: "passed", approvals: 0, required_approvals: 1, mergeable: false };

describe("the merge queue and approvals", () => {
  it("keeps a CR short of approvals queued, and lets the CRs behind it on its base merge", async () => {
    const q = queue([
      { id: "a", ...unapproved },
      { id: "b", ...ready },
    ]);
    await q.run();
    expect(q.letGo).toEqual([]);
    expect(q.merged).toEqual(["b"]);
  });

  it("a CR short of approvals whose checks still run holds nothing either", async () => {
    const q = queue([
      { id: "a", ...unapproved, checks_status: "pending" },
      { id: "b", ...ready },
    ]);
    await q.run();
    expect(q.letGo).toEqual([]);
    expect(q.merged).toEqual(["b"]);
  });

  it("a merge refused for approvals (a push just left them behind) keeps the CR queued", async () => {
    const q = queue([
      { id: "a", ...ready, mergeFails: apiError("APPROVAL_REQUIRED", "needs 1 approval") },
      { id: "b", ...ready },
    ]);
    await q.run();
    expect(q.letGo).toEqual([]);
    expect(q.merged).toEqual([]);
  });
});
