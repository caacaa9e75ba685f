import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { availableParallelism, freemem } from "node:os";
import { promisify } from "node:util";
import { newSecret } from "../../protocol/credential.ts";
import type { SeedRuntime } from "../../protocol/daemon.ts";
import { CLAIMED_ENV, SANDBOX_SERVICE_PORT, SandboxEnv } from "../../protocol/env.ts";
import type { Project } from "../../protocol/project.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { resolveSessionImage } from "../images/project-image.ts";
import type { Log, RepositoryPort, SecretsPort, SessionToProvision } from "../ports.ts";
import type { SandboxDriver, SandboxEgress, SandboxLimits } from "../sandbox/driver.ts";
import { createPoolPace } from "./pool-pace.ts";
import { type SandboxReach, sandboxReach } from "./sandbox-reach.ts";
import { readHealth, waitHealth } from "./wait-live.ts";

const run = promisify(execFile);

/** A pooled sandbox: made for one session id (its labels and branch carry it) before any session has it. */
export type PoolMember = {
  projectId: string;
  sessionId: string;
  sandboxId: string;
  serviceKey: string;
  containerId: string;
  url: string;
  image: string;
  baseRef: string;
  baseSha: string;
  secretsRevision: number;
  state: "warming" | "ready" | "reserved";
  /** When its agent runtime boots (SeedRuntime): `now`, warmed up before it is ready; `on-claim`, a burst's extra. */
  runtime: SeedRuntime;
  /** Health checks in a row a ready member did not answer `ready` to. */
  missed: number;
};

export type WarmPoolDeps = {
  driver: SandboxDriver;
  /** How a project's sandboxes go out (the provisioner's egressOf). */
  egressOf: (project: Project) => Promise<SandboxEgress>;
  repos: RepositoryPort;
  secrets: SecretsPort;
  platformImage: () => Promise<string>;
  /** The environment a session's sandbox gets (sandbox-env.ts), as the provisioner builds it. */
  envFor: (
    project: Project,
    session: SessionToProvision,
    credentials: {
      serviceKey: string;
      cliToken: string;
      secrets: { values: Record<string, string>; revision: number };
    },
    egress: SandboxEgress,
  ) => Record<string, string>;
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
  installationId: string;
  /** This API process: its pool's containers carry it, so the reconciler leaves them to it while it lives. */
  instanceId: string;
  log: Log;
  /** The clock demand and idleness are measured by; default Date.now (tests pass their own). */
  now?: () => number;
  /** The host's free memory in bytes, which a burst's extra members must leave room in; default os.freemem. */
  freeMemory?: () => number;
  /** A project's members booting at once; default two where the host has two cores, else one (see createWarmPool). */
  bootsAtOnce?: number;
};

/** The session a pool sandbox is made for, before anyone asked for it: the project's default branch and agent. */
function pooledSession(project: Project, sessionId: string, agent: string): SessionToProvision {
  return {
    session_id: sessionId,
    branch: sessionId,
    base_ref: project.default_branch,
    agent_name: agent,
    agent_model: null,
    initial_prompt: null,
  } as SessionToProvision;
}

const MAX_BUNDLE_BYTES = 512 << 20;
const SEED_TIMEOUT_MS = 60_000;

/**
 * The project's base branch as a git bundle: what seeds a pooled workspace without any credential. Held in memory
 * (a repository past MAX_BUNDLE_BYTES gets no pool; its sessions clone as cold ones do).
 */
async function bundleOf(gitDir: string, branch: string): Promise<Buffer> {
  const { stdout } = await run("git", ["bundle", "create", "-", `refs/heads/${branch}`], {
    cwd: gitDir,
    encoding: "buffer",
    maxBuffer: MAX_BUNDLE_BYTES,
  });
  return stdout;
}

/**
 * Warm sandboxes per project: created, seeded with the default branch, their agent runtime booted and warmed up,
 * so a session claims one instead of waiting for all that. Only SVC_POOL_SIZE of a pool's members are warmed so;
 * those a burst adds beyond it are seeded `on-claim` (SeedRuntime): ready once their workspace is, their runtime
 * booted by the claim as a cold sandbox's is at its start. A warm member costs a core some 17 s (the runtime's boot
 * and first agent loop), a staged one about 2: on a busy host, a burst's members are then ready for the next burst
 * instead of still booting, and a session starting from one is running as fast as from a warm one. Each is made for one session id and used once: a
 * claimed sandbox goes with its session, and never carries another session's files, env or processes.
 * Members whose base branch moved or whose project secrets changed are replaced; projects without sessions for
 * `idleMs` give theirs up.
 *
 * Refill ahead of demand: every request starts the replacement of what it took at once (not on the next tick), and
 * a burst of requests grows the project's pool for a while (pool-pace.ts). A project's members boot `bootsAtOnce`
 * at a time: a boot is held to one core by the sandbox's CPU limit, so one alone leaves a second core idle, and
 * more than the cores would only slow each other and the claims they are made for.
 */
export function createWarmPool(deps: WarmPoolDeps) {
  const { driver, settings, log } = deps;
  const reach = deps.reach ?? sandboxReach("direct", "", undefined);
  const now = deps.now ?? Date.now;
  const freeMemory = deps.freeMemory ?? freemem;
  const bootsAtOnce = deps.bootsAtOnce ?? Math.min(2, availableParallelism());
  const members = new Map<string, PoolMember>();
  const wanted = new Map<string, { project: Project; at: number }>();
  const filling = new Map<string, Promise<void>>();
  /** Projects asked to fill while their fill ran: it looks again before it ends, so no request waits for a tick. */
  const again = new Set<string>();
  const pace = createPoolPace(settings, now);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const ofProject = (projectId: string) => [...members.values()].filter((m) => m.projectId === projectId);

  async function discard(member: PoolMember): Promise<void> {
    members.delete(member.sessionId);
    reach.forget(member.sandboxId);
    await driver.remove(member.containerId).catch((err) => {
      log("could not remove a pooled sandbox", { container: member.containerId, error: (err as Error).message });
    });
  }

  /** Waits until the daemon's pool state is `want`; rejects when it failed, went away or took too long. */
  const waitPool = (member: PoolMember, want: "seeding" | "ready") =>
    waitHealth(
      member.url,
      Date.now() + settings.readyTimeoutMs,
      ({ pool }) => (pool === want ? true : pool === "failed" ? "the pooled sandbox failed to boot" : undefined),
      {
        everyMs: 50,
        timeout: `the pooled sandbox was not ${want} in time`,
        stopped: () => stopped || !members.has(member.sessionId),
      },
    );

  /** Makes one ready member: `failed` when its sandbox did not boot (logged, nothing left behind). */
  async function addMember(project: Project, runtime: SeedRuntime): Promise<"ready" | "no base" | "failed"> {
    const baseSha = (await deps.repos.tips(project))?.get(project.default_branch);
    if (!baseSha) return "no base";
    const gitDir = await deps.repos.gitDir(project);
    const sessionId = randomUUID();
    const sandboxId = randomUUID();
    // The default branch's .svc/ as a cold session's is: a claim needs the image it would have built.
    const image = await resolveSessionImage(driver, {
      gitDir,
      branch: project.default_branch,
      commit: baseSha,
      platformImage: await deps.platformImage(),
      sandbox: { owner: { installationId: deps.installationId, sandboxId }, limits: settings.limits },
    });
    const secrets = await deps.secrets.values(project.id);
    const serviceKey = newSecret(SERVICE_KEY_PREFIX);
    // Fixed with the default branch the member holds: a merge that changes the list replaces the member.
    const egress = await deps.egressOf(project);
    const env = deps.envFor(
      project,
      pooledSession(project, sessionId, settings.defaultAgent),
      { serviceKey, cliToken: "", secrets },
      egress,
    );
    for (const name of [...CLAIMED_ENV, SandboxEnv.autoClone]) delete env[name];
    env[SandboxEnv.pooled] = "1";
    const containerId = await driver.create({
      name: `svc-${sessionId.slice(0, 8)}-${sandboxId.slice(0, 8)}`,
      image,
      env,
      owner: { installationId: deps.installationId, sandboxId, sessionId, projectId: project.id },
      servicePort: SANDBOX_SERVICE_PORT,
      limits: settings.limits,
      pool: deps.instanceId,
      egress,
    });
    const member: PoolMember = {
      projectId: project.id,
      sessionId,
      sandboxId,
      serviceKey,
      containerId,
      url: "",
      image,
      baseRef: project.default_branch,
      baseSha,
      secretsRevision: secrets.revision,
      state: "warming",
      runtime,
      missed: 0,
    };
    members.set(sessionId, member);
    try {
      // No session row holds this key yet: the link is told to take it before the daemon can dial.
      reach.expect(serviceKey, sandboxId);
      const info = await driver.start(containerId);
      member.url = await reach.endpoint(sandboxId, info, Date.now() + settings.readyTimeoutMs, "the pooled sandbox");
      await waitPool(member, "seeding");
      await seed(member, gitDir);
      await waitPool(member, "ready");
      member.state = "ready";
      return "ready";
    } catch (err) {
      log("a pooled sandbox failed", { project: project.id, error: (err as Error).message });
      await discard(member);
      return "failed";
    }
  }

  /** Sends the base branch; the daemon answers once its workspace is cloned, with the commit it holds. */
  async function seed(member: PoolMember, gitDir: string): Promise<void> {
    const res = await fetch(`${member.url}/svc/pool/seed?runtime=${member.runtime}`, {
      method: "POST",
      headers: { authorization: `Bearer ${member.serviceKey}`, "content-type": "application/octet-stream" },
      body: new Uint8Array(await bundleOf(gitDir, member.baseRef)),
      signal: AbortSignal.timeout(SEED_TIMEOUT_MS),
    });
    const body = (await res.json()) as { commit?: string | null; error?: { message?: string } };
    if (!res.ok) throw new Error(body.error?.message ?? `seed answered ${res.status}`);
    if (body.commit) member.baseSha = body.commit;
  }

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
            const made = await addMember(project, runtime);
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
      // A burst over: the members it added beyond the target go (ready ones, those booting at a claim first; one
      // still warming goes next time).
      const spare = ofProject(projectId).filter((m) => m.state !== "reserved");
      const surplus = spare
        .filter((m) => m.state === "ready")
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
      members.delete(sessionId);
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
      await Promise.all([...members.values()].map(discard));
    },
  };
}

export type WarmPool = ReturnType<typeof createWarmPool>;
