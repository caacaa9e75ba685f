import { availableParallelism, freemem } from "node:os";
import type { SeedRuntime } from "../../protocol/daemon.ts";
import type { Project } from "../../protocol/project.ts";
import type { SandboxLimits } from "../sandbox/driver.ts";
import { createPoolMembers, type PoolMember, type PoolMembersDeps } from "./pool-members.ts";
import { createPoolPace } from "./pool-pace.ts";
import { type SandboxReach, sandboxReach } from "./sandbox-reach.ts";
import { readHealth } from "./wait-live.ts";

export type WarmPoolDeps = Omit<PoolMembersDeps, "reach" | "settings" | "stopped"> & {
  /** How the API reaches a member's daemon (sandbox-reach.ts); default its container's address. */
  reach?: SandboxReach;
  settings: {
    /** Ready sandboxes kept per project that had a session lately; 0: no pool. */
    size: number;
    /** A project with no session for this long gives its pool up. */
    idleMs: number;
    /** How often pools are checked against their base branch and refilled. */
    tickMs: number;
    readyTimeoutMs: number;
    defaultAgent: string;
    defaultModel?: string;
    limits: SandboxLimits;
  };
  /** The clock demand and idleness are measured by; default Date.now (tests pass their own). */
  now?: () => number;
  /** The host's free memory in bytes, which a burst's extra members must leave room in; default os.freemem. */
  freeMemory?: () => number;
  /** A project's members booting at once; default two where the host has two cores, else one (see createWarmPool). */
  bootsAtOnce?: number;
};

/**
 * Warm sandboxes per project (pool-members.ts makes them): created, seeded with the default branch, their agent
 * runtime booted and warmed up, so a session claims one instead of waiting for all that. Only SVC_POOL_SIZE of a
 * pool's members are warmed so; those a burst adds beyond it are seeded `on-claim` (SeedRuntime): ready once their
 * workspace is, their runtime booted by the claim as a cold sandbox's is at its start. A warm member costs a core
 * some 17 s (the runtime's boot and first agent loop), one seeded `on-claim` about 2: on a busy host a burst's
 * members are ready for the next burst instead of still booting, and a session starting from one is running as
 * soon as from a warm one, its agent answering a few seconds later, as a cold session's does. Each is made for one
 * session id and used once: a claimed sandbox goes with its session, and never carries another session's files,
 * env or processes. Members whose base branch moved or whose project secrets changed are replaced; projects
 * without sessions for `idleMs` give theirs up.
 *
 * Refill ahead of demand: every request starts the replacement of what it took at once (not on the next tick), and
 * a burst of requests grows the project's pool for a while (pool-pace.ts). A project's members boot `bootsAtOnce`
 * at a time: a boot is held to one core by the sandbox's CPU limit, so one alone leaves a second core idle, and
 * more than the cores would only slow each other and the claims they are made for.
 */
export function createWarmPool(deps: WarmPoolDeps) {
  const { settings, log } = deps;
  const now = deps.now ?? Date.now;
  const freeMemory = deps.freeMemory ?? freemem;
  const bootsAtOnce = deps.bootsAtOnce ?? Math.min(2, availableParallelism());
  const wanted = new Map<string, { project: Project; at: number }>();
  const filling = new Map<string, Promise<void>>();
  /** Projects asked to fill while their fill ran: it looks again before it ends, so no request waits for a tick. */
  const again = new Set<string>();
  const pace = createPoolPace(settings, now);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const members = createPoolMembers({
    ...deps,
    reach: deps.reach ?? sandboxReach("direct", "", undefined),
    stopped: () => stopped,
  });
  const { ofProject, discard } = members;

  /**
   * Whether a member beyond SVC_POOL_SIZE may be made: only while the host keeps room for it and for one more
   * sandbox at its memory limit, so a burst's borrowed members never squeeze out the sessions they are made for.
   */
  const roomToBorrow = () => freeMemory() >= 2 * settings.limits.memoryBytes;

  /**
   * Tops a wanted project's pool up to its target, `bootsAtOnce` members at a time. A boot counts toward the pool
   * from the moment it is decided (before its container exists), so two boots never both take the last place.
   */
  async function topUp(project: Project): Promise<void> {
    let booting = 0;
    /** Of the boots, those whose runtime boots now (`now`). */
    let bootingWarm = 0;
    let madeOne = false;
    /** A boot that cost a sandbox and failed (or threw), not one that found no base branch to make it from. */
    let failed = false;
    // Each line of boots ends on its own failure: the top-up, which `stop` waits for, lasts as long as the last.
    const boots = async () => {
      try {
        while (!stopped && wanted.has(project.id)) {
          const spare = ofProject(project.id).filter((m) => m.state === "ready").length + booting;
          if (spare >= pace.target(project.id) || (spare >= settings.size && !roomToBorrow())) return;
          const warm =
            ofProject(project.id).filter((m) => m.state === "ready" && m.runtime === "now").length + bootingWarm;
          const runtime: SeedRuntime = warm < settings.size ? "now" : "on-claim";
          booting++;
          if (runtime === "now") bootingWarm++;
          try {
            const made = await members.add(project, runtime);
            if (made === "failed") failed = true;
            if (made !== "ready") return;
            madeOne = true;
          } finally {
            booting--;
            if (runtime === "now") bootingWarm--;
          }
        }
      } catch (err) {
        failed = true;
        log("warm pool fill failed", { project: project.id, error: (err as Error).message });
      }
    };
    await Promise.all(Array.from({ length: bootsAtOnce }, boots));
    const waitMs = stopped ? undefined : pace.toppedUp(project.id, { made: madeOne, failed });
    if (waitMs)
      log("warm pool paused after a failed boot", { project: project.id, retry_in_s: Math.round(waitMs / 1000) });
  }

  /**
   * One top-up per project at a time; a call while one runs joins it, and has it look again before it ends: a
   * request that came as the top-up was finishing must not wait for the next tick for its replacement.
   */
  function fill(project: Project): Promise<void> {
    const running = filling.get(project.id);
    if (running) {
      again.add(project.id);
      return running;
    }
    if (pace.paused(project.id)) return Promise.resolve();
    const work = (async () => {
      try {
        do {
          again.delete(project.id);
          await topUp(project);
        } while (again.has(project.id) && !stopped && !pace.paused(project.id));
      } finally {
        // In the same step as the last look at `again`: no call can join a top-up that already decided to end. The
        // `await` above always comes first, so the entry set below exists by then.
        filling.delete(project.id);
      }
    })();
    filling.set(project.id, work);
    return work;
  }

  /**
   * Whether a ready member still answers `ready`: a container that died (the engine restarted, the kernel killed
   * it) would otherwise count as spare forever and the pool would never refill. Two misses in a row, so one slow
   * answer on a busy host does not throw a good sandbox away.
   */
  async function stillReady(member: PoolMember): Promise<boolean> {
    member.missed = (await readHealth(member.url, 3000))?.pool === "ready" ? 0 : member.missed + 1;
    return member.missed < 2;
  }

  /**
   * Drops members a claim could not use anyway (base moved, secrets changed, no longer answering), idle projects'
   * pools, then refills.
   */
  async function tick(): Promise<void> {
    for (const [projectId, { project, at }] of wanted) {
      const ready = ofProject(projectId).filter((m) => m.state === "ready");
      if (now() - at > settings.idleMs) {
        wanted.delete(projectId);
        pace.forget(projectId);
        await Promise.all(ready.map(discard));
        continue;
      }
      const tip = (await deps.repos.tips(project).catch(() => undefined))?.get(project.default_branch);
      const revision = await deps.secrets.revision(projectId).catch(() => undefined);
      const stale = ready.filter(
        (m) => (tip && m.baseSha !== tip) || (revision !== undefined && m.secretsRevision !== revision),
      );
      const live = ready.filter((m) => !stale.includes(m));
      const dead = (await Promise.all(live.map(async (m) => ((await stillReady(m)) ? [] : [m])))).flat();
      // One reserved meanwhile is its claim's to judge: the claim checks base and secrets again.
      await Promise.all([...stale, ...dead].filter((m) => m.state === "ready").map(discard));
      // Ready members beyond the target go (a burst over), those booting at a claim first. Ones still warming count
      // once ready: a reservation given back (the account's cap) while its replacement boots must not cost the
      // pool the one member it can hand out now.
      const spare = ofProject(projectId).filter((m) => m.state === "ready");
      const surplus = spare
        .sort((a, b) => Number(a.runtime === "now") - Number(b.runtime === "now"))
        .slice(0, Math.max(0, spare.length - pace.target(projectId)));
      await Promise.all(surplus.map(discard));
      void fill(project);
    }
  }

  return {
    enabled: settings.size > 0,

    /**
     * A ready sandbox for a new session of `project`, reserved under the session id it was made for; undefined
     * when none fits (another base, agent or model than the pool's) or none is ready. Either way the project's
     * pool is (re)filled in the background.
     */
    reserve(project: Project, wants: { baseRef: string; agent: string; model: string | null }): string | undefined {
      if (settings.size === 0 || stopped) return undefined;
      wanted.set(project.id, { project, at: now() });
      const fits =
        wants.baseRef === project.default_branch &&
        wants.agent === settings.defaultAgent &&
        (wants.model === null || wants.model === settings.defaultModel);
      if (fits) pace.noteDemand(project.id);
      const ready = fits ? ofProject(project.id).filter((m) => m.state === "ready") : [];
      // A warm one first: one seeded `on-claim` boots its runtime after the claim.
      const member = ready.find((m) => m.runtime === "now") ?? ready[0];
      if (member) member.state = "reserved";
      void fill(project);
      return member?.sessionId;
    },

    /**
     * The reserved member made for this session, now the provisioner's: out of the pool for good. Its replacement
     * starts now (it usually has since the reservation; this covers a fill that ended meanwhile), never at a tick.
     */
    take(sessionId: string): PoolMember | undefined {
      const member = members.get(sessionId);
      if (member?.state !== "reserved") return undefined;
      members.hand(sessionId);
      const want = wanted.get(member.projectId);
      if (want && !stopped) void fill(want.project);
      return member;
    },

    /** A reservation whose session was not created after all (the account's cap). */
    release(sessionId: string): void {
      const member = members.get(sessionId);
      if (member?.state === "reserved") member.state = "ready";
    },

    discard,

    /** What the timer runs every `tickMs`: drops stale, dead and surplus members and idle pools, then refills. */
    check: tick,

    start(): void {
      if (settings.size === 0) return;
      timer = setInterval(
        () => void tick().catch((err) => log("warm pool check failed", { error: String(err) })),
        settings.tickMs,
      );
      timer.unref();
    },

    async stop(): Promise<void> {
      stopped = true;
      if (timer) clearInterval(timer);
      await Promise.allSettled([...filling.values()]);
      await Promise.all(members.all().map(discard));
    },
  };
}

export type WarmPool = ReturnType<typeof createWarmPool>;
