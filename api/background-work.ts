import type { BackgroundWorkOptions, Orchestrator } from "../orchestrator/orchestrator.ts";
import type { TriggerScheduler } from "../orchestrator/triggers/scheduler.ts";
import { type CheckSchedulerDeps, startCheckScheduler } from "./checks/scheduler.ts";
import { recordTranscripts } from "./sessions/transcript-recorder.ts";

export type BackgroundWorkDeps = {
  orchestrator: Orchestrator;
  triggerScheduler: TriggerScheduler;
  /** Who hears of a sandbox that stopped answering (the sandbox links' registry calls each). */
  sandboxLost: Set<() => void>;
  recorder: Omit<Parameters<typeof recordTranscripts>[0], "lead">;
  checks: Omit<CheckSchedulerDeps, "lead" | "isAlive">;
};

/**
 * What an API process with sessions runs beside its routes, each part doing its work only while this process leads
 * (`work.cluster`): the orchestrator's sweeps, the trigger scheduler, the transcript recorder and the check
 * scheduler. Returns the stop of all four.
 */
export function startBackgroundWork(work: BackgroundWorkOptions, deps: BackgroundWorkDeps): () => void {
  const stopOrchestrator = deps.orchestrator.startBackgroundWork({
    ...work,
    onSandboxLost: (listener) => {
      deps.sandboxLost.add(listener);
      return () => deps.sandboxLost.delete(listener);
    },
  });
  void deps.triggerScheduler.start(work.cluster.lead);
  const stopRecorder = recordTranscripts({ ...deps.recorder, lead: work.cluster.lead });
  const stopChecks = startCheckScheduler({ ...deps.checks, lead: work.cluster.lead, isAlive: work.cluster.isAlive });
  return () => {
    stopOrchestrator();
    deps.triggerScheduler.stop();
    stopRecorder();
    stopChecks();
  };
}
