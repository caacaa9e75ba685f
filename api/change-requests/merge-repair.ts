import type { ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { Project } from "../../protocol/project.ts";
import { apiError } from "../errors.ts";
import type { Events } from "../events.ts";
import { readBranchTips, tipHolds } from "../git/refs.ts";
import type { Repositories } from "../git/repositories.ts";
import { RepoUnavailableError } from "../git/repositories.ts";
import {
  type IntentFacts,
  type IntentVerdict,
  intentVerdict,
  type MergeIntent,
  mergeTicketRef,
} from "./merge-intents.ts";
import type { ChangeRequestStore } from "./store.ts";

/** What settling interrupted merges needs from the API process's world. */
export type MergeRepairContext = {
  /** Whether the API process with this instance id still runs (orchestrator/cluster.ts). */
  isAlive: (instanceId: string) => Promise<boolean>;
  project: (projectId: string) => Promise<Project | undefined>;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

export type MergeRepairResult = { recorded: number; dropped: number; waiting: number };

/**
 * How long a merge or close waits for another live process's merge of the same CR to end (between its intent and
 * its record there is only the branch move and one transaction) before answering 409.
 */
const OTHER_MERGE_WAIT_MS = 5000;

export const beingMerged = (cr: ChangeRequestRecord) =>
  apiError("CONFLICT", `CR #${cr.number} is being merged by another API process; try again in a moment`);

/**
 * Merges a process did not live to record: settled against the base branch (merge-intents.ts), at the API's start
 * and every so often, and by a merge or close of the same CR that meets one first.
 */
export function createMergeRepair(deps: {
  store: ChangeRequestStore;
  repos: Repositories;
  events: Events;
  instanceId: string;
  /** The CR service's per-project lock: merges, closes and settling of one project's CRs run one at a time. */
  withProjectLock: ReturnType<typeof createKeyedMutex>;
  load: (project: Project, ref: string) => Promise<ChangeRequestRecord>;
}) {
  const { store, repos } = deps;
  /**
   * The cluster as merges and closes see it when they meet a leftover intent. Until the repair starts with the
   * cluster's answer, every other process's intent counts as one in flight: only this process's own are settled.
   */
  let cluster: Pick<MergeRepairContext, "isAlive" | "log"> = { isAlive: async () => true, log: () => {} };

  /**
   * The intent's base branch as it will stay, read afresh (an external mirror is fetched first): its merge's ticket
   * is voided first, so the branch can no longer move to the target behind this reading.
   */
  async function baseNow(project: Project, intent: MergeIntent): Promise<IntentFacts["base"]> {
    let dir: string;
    try {
      if (!(await repos.voidTicket(project, mergeTicketRef(intent.intent_id)))) return "unreadable";
      dir = await repos.open(project, 0);
    } catch (err) {
      if (err instanceof RepoUnavailableError) return "unreadable";
      throw err;
    }
    const tip = (await readBranchTips(dir)).get(intent.base_ref);
    if (!tip) return "missing";
    return { holdsTarget: await tipHolds(dir, tip, intent.target_sha) };
  }

  /**
   * Settles one intent against its base branch (intent-verdict rules in merge-intents.ts). Runs under the project's
   * lock, which every merge of this process holds from writing its intent to recording it: an intent of this
   * process found here is therefore never one in flight.
   */
  async function settle(
    project: Project,
    intent: MergeIntent,
    isAlive: MergeRepairContext["isAlive"],
    log: MergeRepairContext["log"],
  ) {
    const ownerMayBeMerging = intent.instance_id !== deps.instanceId && (await isAlive(intent.instance_id));
    const base = ownerMayBeMerging ? "unreadable" : await baseNow(project, intent);
    const verdict: IntentVerdict = intentVerdict({ ownerMayBeMerging, base });
    const about = { cr: intent.cr_id, base: intent.base_ref, commit: intent.target_sha, instance: intent.instance_id };
    if (verdict === "record") {
      const merged = await store.settleMerged(intent);
      if (merged) {
        repos.invalidate(project);
        log("an interrupted merge was recorded: its commit is on the base branch", {
          ...about,
          number: merged.number,
        });
        deps.events.emit("change-request.changed", { project, cr: merged, change: "merged" });
      }
    } else if (verdict === "drop") {
      await store.dropIntent(intent);
      log("an interrupted merge never reached the base branch: its intent is dropped, the CR stays open", about);
    }
    return { verdict, ownerMayBeMerging };
  }

  /** Whether the merge behind `intent`, another live process's, ended (recorded or failed) within the wait. */
  async function otherMergeEnds(intent: MergeIntent): Promise<boolean> {
    const deadline = Date.now() + OTHER_MERGE_WAIT_MS;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      if ((await store.intentOf(intent.cr_id))?.intent_id !== intent.intent_id) return true;
    }
    return false;
  }

  /**
   * Before a merge or close: what an earlier, interrupted merge of this CR left is settled first, and one another
   * live process is making is waited for. Returns the CR as it is then.
   */
  async function settleLeftover(project: Project, cr: ChangeRequestRecord): Promise<ChangeRequestRecord> {
    const intent = await store.intentOf(cr.cr_id);
    if (!intent) return cr;
    const { verdict, ownerMayBeMerging } = await settle(project, intent, cluster.isAlive, cluster.log);
    if (ownerMayBeMerging && !(await otherMergeEnds(intent))) throw beingMerged(cr);
    if (!ownerMayBeMerging && verdict === "wait")
      throw apiError("REPO_UNAVAILABLE", "the project's repository cannot be reached");
    return deps.load(project, cr.cr_id);
  }

  /** Settles every intent that no live process is working on; each under its project's lock. */
  async function repairMerges(ctx: MergeRepairContext): Promise<MergeRepairResult> {
    const result: MergeRepairResult = { recorded: 0, dropped: 0, waiting: 0 };
    for (const intent of await store.intents()) {
      if (intent.instance_id !== deps.instanceId && (await ctx.isAlive(intent.instance_id))) {
        result.waiting += 1;
        continue;
      }
      // A project removed meanwhile took its CRs and their intents with it.
      const project = await ctx.project(intent.project_id);
      if (!project) continue;
      const verdict = await deps.withProjectLock(project.id, async () => {
        const current = await store.intentOf(intent.cr_id);
        // Settled meanwhile (by a merge of the CR, or by another process's repair).
        if (current?.intent_id !== intent.intent_id) return undefined;
        return (await settle(project, current, ctx.isAlive, ctx.log)).verdict;
      });
      if (verdict === "record") result.recorded += 1;
      else if (verdict === "drop") result.dropped += 1;
      else if (verdict === "wait") result.waiting += 1;
    }
    return result;
  }

  return {
    otherMergeEnds,
    settleLeftover,
    repairMerges,

    /**
     * Settles what interrupted merges left (`repairMerges`) now and every `everyMs` until the function returned is
     * called; from here on a merge or close also settles a leftover of its CR whose process `isAlive` says is gone.
     * Resolves when the first pass is done, or after `firstPassWaitMs` (an external remote that hangs must not hold
     * the API's start: the pass goes on, and a merge or close of a CR settles its own leftover first anyway).
     */
    async startMergeRepair(
      ctx: MergeRepairContext & { everyMs: number; firstPassWaitMs?: number },
    ): Promise<() => void> {
      cluster = ctx;
      let running = false;
      const run = async () => {
        if (running) return;
        running = true;
        try {
          await repairMerges(ctx);
        } catch (err) {
          ctx.log("merge repair failed", { error: (err as Error).message });
        } finally {
          running = false;
        }
      };
      let waited: NodeJS.Timeout | undefined;
      await Promise.race([
        run(),
        new Promise((resolve) => {
          waited = setTimeout(resolve, ctx.firstPassWaitMs ?? 30_000);
        }),
      ]);
      clearTimeout(waited);
      const timer = setInterval(() => void run(), ctx.everyMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
