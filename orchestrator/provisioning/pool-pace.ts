/**
 * SVC_POOL_SIZE's own maximum (protocol/stack-settings.ts): no project's pool ever holds more, burst or not. A burst
 * grows a pool up to it: as many as the burst asked for, so the next such burst is served warm to its last request.
 */
export const MAX_POOL_PER_PROJECT = 8;
/** Requests a pooled sandbox could serve, counted over this window, are what a burst is measured by. */
export const BURST_WINDOW_MS = 60_000;
/** How long a pool grown by a burst keeps its size after the burst's last request before shrinking back. */
export const BURST_HOLD_MS = 10 * 60_000;
/** The longest a project's pool waits before trying again after boots that kept failing. */
const MAX_FAILURE_BACKOFF_MS = 10 * 60_000;

/**
 * How many warm sandboxes each project's pool aims for, and whether it may make one now: the pool's pace, apart from
 * the sandboxes themselves (warm-pool.ts). Plain bookkeeping over `now`, which tests drive.
 */
export function createPoolPace(settings: { size: number; tickMs: number }, now: () => number) {
  /** Per project: when requests a pooled sandbox could serve came, within BURST_WINDOW_MS. */
  const demand = new Map<string, number[]>();
  /** Per project: the size a burst raised its pool to, and when that burst's last request came. */
  const raised = new Map<string, { size: number; at: number }>();
  /**
   * Per project: top-ups in a row with a failed boot, and until when the pool makes no member. An image that does
   * not build or a sandbox that cannot boot would otherwise be retried at every tick and request, each try costing
   * what a boot costs; sessions start cold meanwhile.
   */
  const failing = new Map<string, { count: number; until: number }>();

  return {
    /**
     * The spare members a project's pool aims for: `size`, or while a burst lasts (and BURST_HOLD_MS after it) as
     * many as it saw requests within BURST_WINDOW_MS, up to MAX_POOL_PER_PROJECT. Why as many as the last minute's
     * requests: that is the best guess of the next minute's, and the size a pool needs for the next such burst to be
     * served warm, since boots cannot keep up with requests back to back. Why held for a while: members take seconds
     * each to boot; dropping them as soon as the window passed would throw away the work just done.
     */
    target(projectId: string): number {
      const burst = raised.get(projectId);
      return burst && now() - burst.at <= BURST_HOLD_MS ? Math.max(settings.size, burst.size) : settings.size;
    },

    /** Counts a request a pooled sandbox could serve (whether one was ready or not) toward a burst. */
    noteDemand(projectId: string): void {
      const at = now();
      // Only the newest MAX_POOL_PER_PROJECT matter: a flood of requests keeps a short list.
      const recent = [...(demand.get(projectId) ?? []).filter((t) => at - t < BURST_WINDOW_MS), at].slice(
        -MAX_POOL_PER_PROJECT,
      );
      demand.set(projectId, recent);
      const size = recent.length;
      if (size <= settings.size) return;
      const burst = raised.get(projectId);
      const held = burst && at - burst.at <= BURST_HOLD_MS ? burst.size : 0;
      raised.set(projectId, { size: Math.max(size, held), at });
    },

    /** Whether the project's pool waits out failed boots: no member is made until then. */
    paused: (projectId: string): boolean => now() < (failing.get(projectId)?.until ?? 0),

    /** A top-up's outcome: any member made ends a wait; a failed boot waits two ticks, twice as long each time in a row. */
    toppedUp(projectId: string, outcome: { made: boolean; failed: boolean }): number | undefined {
      if (outcome.made) failing.delete(projectId);
      if (!outcome.failed) return undefined;
      const count = (failing.get(projectId)?.count ?? 0) + 1;
      const waitMs = Math.min(settings.tickMs * 2 ** count, MAX_FAILURE_BACKOFF_MS);
      failing.set(projectId, { count, until: now() + waitMs });
      return waitMs;
    },

    /** The project gave its pool up (idle): what was counted for it goes too. */
    forget(projectId: string): void {
      demand.delete(projectId);
      raised.delete(projectId);
      failing.delete(projectId);
    },
  };
}
