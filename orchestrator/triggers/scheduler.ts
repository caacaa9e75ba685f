import cron, { type ScheduledTask } from "node-cron";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { TriggerSpec } from "../../protocol/manifest.ts";
import { whileLeading } from "../cluster.ts";
import type { Log, ProjectTriggers, TriggerPort } from "../ports.ts";

/**
 * Missed instants: after a (re)start or a takeover the leader fires at most the single most recent instant it
 * missed, and only when that instant is at most this old and came after the schedule started running; anything
 * older is skipped. The claim row keeps an instant another process already fired from firing again.
 */
export const CATCH_UP_MS = 5 * 60_000;
const RESYNC_MS = 60_000;
const LEAD_CHECK_MS = 5_000;

export type SchedulerOptions = {
  port: TriggerPort;
  log: Log;
  catchUpMs?: number;
  resyncMs?: number;
  leadCheckMs?: number;
};

/** `lastSlot`: the newest instant this job fired; `missed`: the newest instant node-cron reported late. */
type Job = { key: string; task: ScheduledTask; lastSlot: number; missed?: number };

/** What of a trigger its job depends on: a change to any of it replaces the job. */
const jobKey = (t: TriggerSpec) =>
  JSON.stringify([t.schedule, t.timezone ?? null, t.prompt, t.enabled, t.base_ref ?? null, t.agent ?? null]);

const schedule = (t: TriggerSpec) => t.schedule.trim();

const wholeSecond = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

/**
 * One cron job (node-cron) per enabled trigger of every project, run only while this process leads the cluster.
 * Each instant is claimed (a unique row) before its session is created, so it fires once across processes.
 * Jobs follow the default branch: `reload(projectId)` after a merge, a push or a fetch, and a full resync on a timer.
 */
export function createTriggerScheduler(options: SchedulerOptions) {
  const { port, log } = options;
  const catchUpMs = options.catchUpMs ?? CATCH_UP_MS;
  const jobs = new Map<string, Map<string, Job>>();
  let lead: () => Promise<boolean> = async () => false;
  let running = false;
  let moveCursor: string | null = null;
  let timers: NodeJS.Timeout[] = [];

  async function fireAt(projectId: string, trigger: TriggerSpec, at: Date): Promise<void> {
    try {
      if (!running || !(await lead())) return;
      if (!(await port.claim(projectId, trigger.slug, at))) return;
      const out = await port.fire(projectId, trigger, at);
      if ("error" in out) log("trigger did not start a session", { project: projectId, trigger: trigger.slug, ...out });
    } catch (err) {
      log("trigger firing failed", { project: projectId, trigger: trigger.slug, error: (err as Error).message });
    }
  }

  /** The most recent instant of `task` in (`after`, now], within the catch-up window. */
  function lastMissed(task: ScheduledTask, after: Date): Date | undefined {
    const now = wholeSecond(new Date()).getTime();
    const floor = Math.max(after.getTime(), now - catchUpMs);
    for (let t = now; t > floor; t -= 1000) if (task.match(new Date(t))) return new Date(t);
    return undefined;
  }

  async function apply(pt: ProjectTriggers): Promise<void> {
    if (!pt.triggers) return;
    const current = jobs.get(pt.projectId) ?? new Map<string, Job>();
    jobs.set(pt.projectId, current);
    const wanted = new Map<string, TriggerSpec>();
    for (const t of pt.triggers) {
      if (!t.enabled) continue;
      if (!cron.validate(t.schedule)) {
        log("trigger schedule is not a cron expression", { project: pt.projectId, trigger: t.slug });
        continue;
      }
      wanted.set(t.slug, t);
    }
    for (const [slug, job] of current) {
      const t = wanted.get(slug);
      if (t && jobKey(t) === job.key) continue;
      await job.task.destroy();
      current.delete(slug);
    }
    // Disabled or removed: its next run starts afresh, with no instant from before to catch up.
    for (const t of pt.triggers) if (!wanted.has(t.slug)) await port.scheduled(pt.projectId, t.slug, null);
    for (const [slug, t] of wanted) {
      if (current.has(slug)) continue;
      const job: Job = { key: jobKey(t), task: undefined as unknown as ScheduledTask, lastSlot: 0 };
      const onSlot = (at: Date) => {
        job.lastSlot = Math.max(job.lastSlot, at.getTime());
        return fireAt(pt.projectId, t, at);
      };
      try {
        job.task = cron.schedule(schedule(t), (ctx) => onSlot(wholeSecond(ctx.date)), {
          name: `${pt.projectId}/${slug}`,
          timezone: t.timezone,
          suppressMissedWarning: true,
        });
      } catch (err) {
        // An unknown time zone, say: this trigger waits for a fixed manifest, the project's others still run.
        log("trigger could not be scheduled", { project: pt.projectId, trigger: slug, error: (err as Error).message });
        continue;
      }
      // A blocked event loop makes node-cron skip instants (1 s tolerance): the newest one skipped in a beat still
      // fires, unless a later instant ran meanwhile; older ones are dropped, as after a restart.
      job.task.on("execution:missed", (ctx) => {
        job.missed = Math.max(job.missed ?? 0, wholeSecond(ctx.date).getTime());
        setTimeout(() => {
          const missed = job.missed;
          job.missed = undefined;
          if (missed && missed > job.lastSlot && Date.now() - missed <= catchUpMs) void onSlot(new Date(missed));
        }, 50);
      });
      current.set(slug, job);
      const task = job.task;
      const { since, lastClaimed } = await port.scheduled(pt.projectId, slug, t.schedule);
      const missed = lastMissed(task, lastClaimed && lastClaimed > since ? lastClaimed : since);
      if (missed) void onSlot(missed);
    }
  }

  function dropProject(projectId: string): void {
    for (const job of jobs.get(projectId)?.values() ?? []) void job.task.destroy();
    jobs.delete(projectId);
  }

  /** Runs `fn` after the project's previous reload: one project's jobs are rebuilt one reload at a time. */
  const oneReloadAtATime = createKeyedMutex();
  const serial = (projectId: string, fn: () => Promise<void>) =>
    oneReloadAtATime(projectId, fn).catch((err) =>
      log("trigger reload failed", { project: projectId, error: (err as Error).message }),
    );

  async function reload(projectId: string): Promise<void> {
    if (!running) return;
    await serial(projectId, async () => {
      if (!running) return;
      const pt = await port.project(projectId);
      if (pt) await apply(pt);
      else dropProject(projectId);
    });
  }

  async function resync(): Promise<void> {
    if (!running) return;
    const all = await port.projects();
    const seen = new Set(all.map((p) => p.projectId));
    for (const projectId of jobs.keys())
      if (!seen.has(projectId)) await serial(projectId, async () => dropProject(projectId));
    await Promise.all(all.map((pt) => serial(pt.projectId, async () => (running ? apply(pt) : undefined))));
  }

  function stopJobs(): void {
    running = false;
    for (const projectId of [...jobs.keys()]) dropProject(projectId);
  }

  /** Schedules while `lead()` says so, drops every job when it stops saying so. */
  const followLead = () =>
    whileLeading({
      lead,
      name: "trigger scheduler",
      log,
      async start() {
        running = true;
        log("trigger scheduler started on this API process");
        moveCursor = (await port.movedSince(null).catch(() => undefined))?.cursor ?? null;
        await resync().catch((err) => log("trigger resync failed", { error: (err as Error).message }));
      },
      // Merges other API processes received since the last check.
      async tick() {
        try {
          const merged = await port.movedSince(moveCursor);
          moveCursor = merged.cursor;
          await Promise.all(merged.projectIds.map(reload));
        } catch (err) {
          log("trigger reload after merges failed", { error: (err as Error).message });
        }
      },
      stop() {
        stopJobs();
        log("trigger scheduler stopped: this API process no longer leads");
      },
    });

  return {
    reload,
    /** Starts following leadership (`lead` from orchestrator/cluster.ts); returns when the first check is done. */
    async start(leadFn: () => Promise<boolean>): Promise<void> {
      lead = leadFn;
      const checkLead = followLead();
      for (const t of timers) clearInterval(t);
      timers = [
        setInterval(() => void checkLead(), options.leadCheckMs ?? LEAD_CHECK_MS),
        setInterval(
          () => void resync().catch((err) => log("trigger resync failed", { error: (err as Error).message })),
          options.resyncMs ?? RESYNC_MS,
        ),
      ];
      await checkLead();
    },
    stop(): void {
      for (const t of timers) clearInterval(t);
      timers = [];
      stopJobs();
    },
    /** Slugs with a live job, per project (tests and diagnostics). */
    scheduledSlugs: (projectId: string) => [...(jobs.get(projectId)?.keys() ?? [])],
  };
}

export type TriggerScheduler = ReturnType<typeof createTriggerScheduler>;
