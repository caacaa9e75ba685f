import type { ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { Project } from "../../protocol/project.ts";
import { ApiError } from "../errors.ts";
import type { PreviewCache } from "../git/merge-preview.ts";
import type { Repositories } from "../git/repositories.ts";
import type { SessionService } from "../sessions/service.ts";
import { mergeCommitFor } from "./merge-commit.ts";
import type { CheckStore, StoredRun } from "./store.ts";

/** The end of a check's output kept: enough to read the failure, bounded for the database and the page. */
export const CHECK_LOG_MAX = 64 * 1024;
/** How often a running check's log is written, for those following it. */
const LOG_FLUSH_MS = 1000;

export type CheckRunnerDeps = {
  store: CheckStore;
  sessions: SessionService;
  repos: Pick<Repositories, "open" | "deleteBranch">;
  previews: PreviewCache;
  /** How long a check's sandbox may take to start. */
  startTimeoutMs: number;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

const SUPERSEDED = "[stopped: the CR's head or base moved on, and its checks run again there]";

/** What became of a run: finished, or back in the queue (no room under the session cap). */
export type RunOutcome = { finished: StoredRun | undefined } | { requeued: true };

/** Keeps the last CHECK_LOG_MAX characters, saying how much went before them. */
function tail(text: string, dropped: number): string {
  return dropped > 0 ? `[… ${dropped} earlier characters not kept]\n${text}` : text;
}

/**
 * Runs one taken check: its commit (the merge the CR would make), a sandbox of the project's image under a
 * session of its own (the agents' limits, network and egress; counted by the session cap), the command in
 * /workspace at that commit with its timeout, the log as it comes; then the sandbox and its branch go.
 */
export async function runCheck(
  deps: CheckRunnerDeps,
  project: Project,
  cr: ChangeRequestRecord,
  run: StoredRun,
  /** Aborted when the CR's head or base moved on: the run checks what can no longer merge. */
  superseded: AbortSignal,
): Promise<RunOutcome> {
  let output = "";
  let dropped = 0;
  const finish = (status: "passed" | "failed" | "error", exitCode: number | null, note?: string) =>
    deps.store.finish(run.run_id, { status, exitCode, log: tail(note ? `${output}${note}\n` : output, dropped) });

  let commit: string;
  try {
    const dir = await deps.repos.open(project, 0);
    commit = await mergeCommitFor(dir, deps.previews, cr, run.base_sha, run.head_sha);
  } catch (err) {
    return { finished: await finish("error", null, `could not make the commit to check: ${(err as Error).message}`) };
  }
  let sessionId: string;
  let branch: string;
  try {
    const session = await deps.sessions.create(project, { base_ref: cr.base_ref }, cr.created_by, {
      check: { startSha: commit },
    });
    sessionId = session.session_id;
    branch = session.branch;
  } catch (err) {
    if (err instanceof ApiError && err.code === "SESSION_CAP_REACHED") {
      await deps.store.requeue(run.run_id);
      return { requeued: true };
    }
    return { finished: await finish("error", null, `could not start the check's sandbox: ${(err as Error).message}`) };
  }
  await deps.store.setRunning(run.run_id, { sessionId, commitSha: commit });
  try {
    const started = await deps.sessions.waitStarted(project, sessionId, {
      timeoutMs: deps.startTimeoutMs,
      signal: new AbortController().signal,
    });
    if (superseded.aborted) return { finished: await finish("error", null, SUPERSEDED) };
    if (started.status !== "running") {
      return {
        finished: await finish("error", null, `the check's sandbox did not start: ${started.error ?? started.status}`),
      };
    }
    const mask = await deps.sessions.masker(project, sessionId);
    // A pooled sandbox's workspace is at the base: the check's branch holds the commit to run on.
    const script = `git fetch -q origin ${branch} && git checkout -q --detach FETCH_HEAD && exec sh -c "$SVC_CHECK_RUN"`;
    const exec = await deps.sessions.exec(project, sessionId, {
      cmd: ["env", `SVC_CHECK_RUN=${run.run}`, "sh", "-c", script],
      tty: false,
      stdin: false,
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      exec.close();
    }, run.timeout_s * 1000);
    const stop = () => exec.close();
    superseded.addEventListener("abort", stop, { once: true });
    let written = output;
    const flush = setInterval(() => {
      if (output === written) return;
      written = output;
      void deps.store.setLog(run.run_id, tail(output, dropped)).catch(() => {});
    }, LOG_FLUSH_MS);
    try {
      for await (const { data } of exec.output) {
        // The first words go out at once: they say the check started.
        if (!output) void deps.store.setLog(run.run_id, mask(data.toString("utf8"))).catch(() => {});
        output += mask(data.toString("utf8"));
        if (output.length > CHECK_LOG_MAX) {
          dropped += output.length - CHECK_LOG_MAX;
          output = output.slice(-CHECK_LOG_MAX);
        }
      }
    } catch (err) {
      // Closing the command on a timeout or a newer head ends its output with an error: that is the stop itself.
      if (!timedOut && !superseded.aborted) throw err;
    } finally {
      clearTimeout(timer);
      clearInterval(flush);
      superseded.removeEventListener("abort", stop);
    }
    if (superseded.aborted) return { finished: await finish("error", null, SUPERSEDED) };
    if (timedOut) return { finished: await finish("failed", null, `[timed out after ${run.timeout_s} s]`) };
    const code = await exec.exitCode();
    return { finished: await finish(code === 0 ? "passed" : "failed", code) };
  } catch (err) {
    return { finished: await finish("error", null, `the check could not run: ${(err as Error).message}`) };
  } finally {
    await deps.sessions
      .remove(project, sessionId)
      .catch((err: Error) =>
        deps.log("could not remove a check's sandbox", { session: sessionId, error: err.message }),
      );
    await deps.repos.deleteBranch(project, branch).catch(() => {});
  }
}
