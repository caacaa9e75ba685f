import { whileLeading } from "../../orchestrator/cluster.ts";
import type { ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { Project } from "../../protocol/project.ts";
import type { ChangeRequestService } from "../change-requests/service.ts";
import type { ChangeRequestStore } from "../change-requests/store.ts";
import type { Events } from "../events.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import { failedCheckPrompt } from "./fix-prompt.ts";
import { advanceMergeQueue, type MergeQueueDeps } from "./merge-queue.ts";
import type { ReviewState } from "./review-state.ts";
import { type CheckRunnerDeps, runCheck } from "./runner.ts";
import type { CheckStore, StoredRun } from "./store.ts";

/** The whole sweep (every open CR, runs of dead processes, the merge queue) this often; events act at once. */
const SWEEP_MS = 5000;

export type CheckSchedulerDeps = {
  store: CheckStore;
  crStore: Pick<ChangeRequestStore, "autoMergeQueue" | "setAutoMerge" | "takeFixRound" | "projectsWithOpen">;
  changeRequests: Pick<ChangeRequestService, "openRecords" | "record" | "merge">;
  review: ReviewState;
  manifests: Pick<ManifestReader, "read">;
  projects: { byId(id: string): Promise<Project | undefined> };
  runner: CheckRunnerDeps;
  /** Hands a prompt to the CR's agent (api/change-requests/feedback.ts), as the CR's author. */
  sendToAgent(project: Project, cr: ChangeRequestRecord, prompt: string): Promise<void>;
  events: Events;
  /** The audit log's entry of each merge the merge queue makes. */
  recordMerge: MergeQueueDeps["recordMerge"];
  lead: () => Promise<boolean>;
  isAlive: (instanceId: string) => Promise<boolean>;
  instanceId: string;
  /** Checks this process runs at once (each is a sandbox). */
  concurrency: number;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

/**
 * The leader's check work: queues each check for every new (head, base) of an open CR, runs the queue in
 * sandboxes (at most `concurrency` at once), sends failed checks back to the agent when `[review] fix_checks`
 * says so, and moves the merge queue. Pushes, CR changes and merges act at once in this process; the sweep
 * catches what other processes saw and what a crash left running.
 */
export function startCheckScheduler(deps: CheckSchedulerDeps): () => void {
  let active = 0;
  let stopped = false;
  /** The (head, base) last queued per CR: a sweep writes only what moved. */
  const queued = new Map<string, string>();
  /** This process's runs in flight, each stoppable when its CR moves on. */
  const inFlight = new Map<string, { crId: string; pair: string; abort: AbortController }>();

  async function queueProject(project: Project): Promise<void> {
    const checks = await deps.review.checksOf(project);
    if (checks.length === 0) return;
    for (const cr of await deps.changeRequests.openRecords(project)) {
      const { head_commit_sha: head, base_commit_sha: base } = cr;
      if (!head || !base || queued.get(cr.cr_id) === `${head}:${base}`) continue;
      await deps.store.dropSuperseded(cr.cr_id, head, base);
      for (const running of inFlight.values())
        if (running.crId === cr.cr_id && running.pair !== `${head}:${base}`) running.abort.abort();
      await deps.store.enqueue(cr, head, base, checks);
      queued.set(cr.cr_id, `${head}:${base}`);
    }
  }

  async function afterRun(project: Project, cr: ChangeRequestRecord, run: StoredRun): Promise<void> {
    // Only an agent's own CR: a person's CR never starts an agent by itself.
    if (run.status !== "failed" || !cr.origin_session_id) return;
    const { review } = (await deps.manifests.read(project)).manifest;
    if (!review.fix_checks || !(await deps.crStore.takeFixRound(cr.cr_id, review.max_fix_rounds))) return;
    await deps.sendToAgent(project, cr, failedCheckPrompt(cr, run));
  }

  async function execute(run: StoredRun): Promise<"requeued" | "done"> {
    const project = await deps.projects.byId(run.project_id);
    const cr = project && (await deps.changeRequests.record(project, run.cr_id).catch(() => undefined));
    if (!project || !cr || cr.status !== "open") {
      await deps.store.finish(run.run_id, { status: "error", exitCode: null, log: "the CR is no longer open" });
      return "done";
    }
    const abort = new AbortController();
    inFlight.set(run.run_id, { crId: cr.cr_id, pair: `${run.head_sha}:${run.base_sha}`, abort });
    const outcome = await runCheck(deps.runner, project, cr, run, abort.signal).finally(() =>
      inFlight.delete(run.run_id),
    );
    if ("requeued" in outcome) return "requeued";
    if (outcome.finished) {
      await afterRun(project, cr, outcome.finished).catch((err: Error) =>
        deps.log("could not send failed checks to the agent", { cr: cr.cr_id, error: err.message }),
      );
    }
    return "done";
  }

  /** Takes queued runs while there is room; a run the session cap refused waits for the next sweep. */
  async function pump(): Promise<void> {
    while (!stopped && active < deps.concurrency) {
      const run = await deps.store.take(deps.instanceId);
      if (!run) return;
      active += 1;
      const ran = execute(run).catch((err: Error) => {
        deps.log("a check failed to run", { run: run.run_id, error: err.message });
        return "done" as const;
      });
      void ran.then(async (result) => {
        active -= 1;
        await moveQueue();
        if (result === "done") await pump();
      });
    }
  }

  const moveQueue = () =>
    advanceMergeQueue(deps).catch((err: Error) => deps.log("merge queue failed", { error: err.message }));

  async function sweep(): Promise<void> {
    for (const run of await deps.store.orphaned(deps.isAlive, deps.instanceId)) {
      // Its process died mid-run: the sandbox goes with its session, and the run waits in the queue again.
      const project = await deps.projects.byId(run.project_id);
      if (project && run.session_id) await deps.runner.sessions.remove(project, run.session_id).catch(() => undefined);
      await deps.store.requeue(run.run_id);
    }
    for (const projectId of await deps.crStore.projectsWithOpen()) {
      const project = await deps.projects.byId(projectId);
      if (project) await queueProject(project);
    }
    await pump();
    await moveQueue();
  }

  async function onChange(projectId: string): Promise<void> {
    if (!(await deps.lead().catch(() => false))) return;
    const project = await deps.projects.byId(projectId);
    if (!project) return;
    await queueProject(project);
    await pump();
    await moveQueue();
  }
  const changed = (projectId: string) =>
    void onChange(projectId).catch((err: Error) => deps.log("check scheduling failed", { error: err.message }));

  const tick = whileLeading({ lead: deps.lead, name: "check scheduler", log: deps.log, tick: sweep });
  const timer = setInterval(() => void tick(), SWEEP_MS);
  void tick();
  const offs = [
    deps.events.on("repo.pushed", ({ projectId }) => changed(projectId)),
    deps.events.on("repo.fetched", ({ projectId }) => changed(projectId)),
    deps.events.on("change-request.changed", ({ project }) => changed(project.id)),
  ];
  return () => {
    stopped = true;
    clearInterval(timer);
    for (const off of offs) off();
  };
}
