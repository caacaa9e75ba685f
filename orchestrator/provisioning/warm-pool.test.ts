import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemoryDriver, type MemoryDriver } from "../../test/support/memory-driver.ts";
import { memoryLog, memoryProject, memoryRepos, memorySecrets } from "../../test/support/memory-ports.ts";
import { waitFor } from "../../test/support/wait.ts";
import { BURST_HOLD_MS, BURST_WINDOW_MS } from "./pool-pace.ts";
import { sandboxEnv } from "./sandbox-env.ts";
import { createWarmPool, type WarmPool } from "./warm-pool.ts";

const IDLE_MS = 30 * 60_000;
const FITS: { baseRef: string; agent: string; model: string | null } = { baseRef: "main", agent: "build", model: null };
// Generous deadlines: a member's boot spawns git (its seed bundle), which a whole run's load can hold up for
// seconds; a deadline is where a broken pool fails, not what a passing test takes.
const until = (what: string, fn: () => boolean) => waitFor(what, async () => fn(), { timeoutMs: 20_000, everyMs: 5 });

let pools: WarmPool[] = [];
afterEach(async () => {
  await Promise.all(pools.map((p) => p.stop()));
  pools = [];
  vi.unstubAllGlobals();
});

function setup(size = 1, freeMemory = () => 64 * 2 ** 30) {
  const mem = createMemoryDriver();
  vi.stubGlobal("fetch", mem.fetch);
  const repos = memoryRepos();
  const secrets = memorySecrets();
  const logs = memoryLog();
  const clock = { now: Date.now() };
  const pool = createWarmPool({
    driver: mem.driver,
    egressOf: async () => "open",
    repos: repos.port,
    secrets: secrets.port,
    platformImage: async () => "svc-sandbox:test",
    envFor: (project, session, credentials) =>
      sandboxEnv({
        project,
        session,
        repoUrl: `http://api.invalid/git/${project.id}.git`,
        apiOrigin: "http://api.invalid",
        serviceKey: credentials.serviceKey,
        cliToken: credentials.cliToken,
        secrets: credentials.secrets.values,
        secretsRevision: credentials.secrets.revision,
        llm: {},
      }),
    settings: {
      size,
      idleMs: IDLE_MS,
      tickMs: 60_000,
      readyTimeoutMs: 30_000,
      defaultAgent: "build",
      limits: { memoryBytes: 1 << 30, nanoCpus: 1e9, pids: 512 },
    },
    installationId: "inst",
    instanceId: "me",
    log: logs.log,
    now: () => clock.now,
    freeMemory,
    bootsAtOnce: 2,
  });
  pools.push(pool);
  const project = memoryProject();
  /** A new session's request, a while after the previous one: spread out like this, requests make no burst. */
  const request = (wants: Partial<typeof FITS> = {}) => {
    clock.now += BURST_WINDOW_MS;
    return pool.reserve(project, { ...FITS, ...wants });
  };
  return { mem, repos, secrets, logs, clock, pool, project, request };
}

/** Pooled containers of the project that are ready to be claimed. */
const ready = (mem: MemoryDriver, projectId: string) => mem.pooled(projectId, "ready");

/** What the provisioner does with a reservation: takes the member and claims its sandbox (no longer ready). */
function claim(mem: MemoryDriver, pool: WarmPool, id: string) {
  const member = pool.take(id)!;
  mem.container(member.containerId)!.daemon!.pool = "claimed";
  return member;
}

/** Waits until the project's pool settled: nothing booting, `n` ready. */
async function settled(mem: MemoryDriver, projectId: string, n: number) {
  await until(`${n} ready pooled sandboxes`, () => {
    const all = mem.pooled(projectId);
    return (
      all.every((c) => c.daemon?.pool !== "seeding" && c.daemon?.pool !== "warming") &&
      ready(mem, projectId).length === n
    );
  });
}

describe("warm pool", () => {
  it("a request fills the pool; the next one reserves a ready sandbox made for it, which a claim takes once", async () => {
    const { mem, pool, project, repos, request } = setup();
    expect(request()).toBeUndefined();
    await settled(mem, project.id, 1);
    const [warm] = ready(mem, project.id);
    // Seeded with the default branch's tip, without any credential of a session.
    expect(warm!.daemon!.seeded).toEqual({ ref: "refs/heads/main", commit: repos.tip(project), runtime: "now" });
    expect(warm!.env.SVC_CLI_TOKEN).toBeUndefined();
    expect(warm!.env.SVC_PROJECT_AUTO_CLONE).toBeUndefined();

    // Another base, agent or model: the pool's sandbox does not fit.
    expect(request({ baseRef: "dev" })).toBeUndefined();
    expect(request({ agent: "plan" })).toBeUndefined();
    expect(request({ model: "other-model" })).toBeUndefined();

    const id = request();
    expect(id).toBe(warm!.owner.sessionId);
    const member = pool.take(id!);
    expect(member).toMatchObject({ sessionId: id, containerId: warm!.id, baseSha: repos.tip(project) });
    expect(pool.take(id!)).toBeUndefined();
  });

  it("a reservation is offered to no one else until released", async () => {
    const { mem, pool, project, request } = setup();
    request();
    await settled(mem, project.id, 1);
    const id = request()!;
    // The replacement is still booting: nothing else is ready, and the reserved one is not handed out again.
    expect(request()).toBeUndefined();
    pool.release(id);
    expect(pool.take(id)).toBeUndefined();
    expect(request()).toBe(id);
  });

  it("a member boots at the engine's least CPU weight and weighs what any sandbox does once it is ready", async () => {
    const { mem, project, request } = setup();
    mem.behaviour.afterSeed = "warming";
    request();
    await until("a member warming up", () => mem.pooled(project.id).some((c) => c.daemon?.pool === "warming"));
    const [booting] = mem.pooled(project.id);
    expect(booting!.yielding).toBe(true);
    // Its boot over: a saturated host must not starve its health checks and its claim.
    booting!.daemon!.pool = "ready";
    await until("the ready member at the default weight", () => !booting!.yielding);
  });

  it("a reservation given back while its replacement boots keeps its member: the pool's check drops no ready one", async () => {
    const { mem, pool, project, request } = setup();
    request();
    await settled(mem, project.id, 1);
    const [warm] = ready(mem, project.id);
    mem.behaviour.afterSeed = "warming";
    const id = request()!;
    await until("the replacement warming", () => mem.pooled(project.id).some((c) => c.daemon?.pool === "warming"));
    // The account's cap refused the session: the member is the pool's again, one more than its size for now.
    pool.release(id);
    await pool.check();
    expect(ready(mem, project.id).map((c) => c.id)).toEqual([warm!.id]);
    expect(request()).toBe(id);
  });

  it("a claim starts its replacement at once, without waiting for the pool's timer", async () => {
    const { mem, pool, project, request } = setup();
    // No pool.start(): no timer runs in this test at all.
    request();
    await settled(mem, project.id, 1);
    const id = request()!;
    claim(mem, pool, id);
    await settled(mem, project.id, 1);
    expect(ready(mem, project.id)[0]!.owner.sessionId).not.toBe(id);
  });

  it("a replacement the reservation could not start (repository unreachable then) starts at the claim", async () => {
    const { mem, pool, project, repos, request } = setup();
    request();
    await settled(mem, project.id, 1);
    repos.state.reachable = false;
    const id = request()!;
    await new Promise((r) => setTimeout(r, 30));
    expect(mem.pooled(project.id)).toHaveLength(1);
    repos.state.reachable = true;
    claim(mem, pool, id);
    await until("a replacement", () => ready(mem, project.id).some((c) => c.owner.sessionId !== id));
  });

  it("a burst of requests grows the pool to the burst's size, two sandboxes booting at a time, then it shrinks", async () => {
    const { mem, pool, project, clock } = setup(1);
    pool.reserve(project, FITS);
    await settled(mem, project.id, 1);
    // Five sessions back to back: the first claims the warm one, the others find none ready.
    const claimed = [...Array(5)].map(() => pool.reserve(project, FITS)).filter((id) => id !== undefined);
    expect(claimed).toHaveLength(1);
    claim(mem, pool, claimed[0]!);
    // Six requests within the window: the next burst of that size finds a warm sandbox for each.
    await settled(mem, project.id, 6);
    await new Promise((r) => setTimeout(r, 50));
    expect(ready(mem, project.id)).toHaveLength(6);
    expect(mem.peakBooting(project.id)).toBe(2);
    // SVC_POOL_SIZE of them warmed up; the burst's others boot their runtime when claimed.
    const runtimes = () => ready(mem, project.id).map((c) => c.daemon!.seeded!.runtime);
    expect(runtimes().sort()).toEqual(["now", "on-claim", "on-claim", "on-claim", "on-claim", "on-claim"]);
    const [warm] = ready(mem, project.id).filter((c) => c.daemon!.seeded!.runtime === "now");
    const next = [...Array(6)].map(() => pool.reserve(project, FITS));
    expect(next.every((id) => id !== undefined)).toBe(true);
    // The burst's first request gets the warm one.
    expect(next[0]).toBe(warm!.owner.sessionId);
    for (const id of next) claim(mem, pool, id!);
    await settled(mem, project.id, 8);

    // Still held a while after the burst: the pool keeps its eight.
    clock.now += BURST_HOLD_MS / 2;
    await pool.check();
    expect(ready(mem, project.id)).toHaveLength(8);
    // The burst long over: back to its size.
    clock.now += BURST_HOLD_MS;
    await pool.check();
    await settled(mem, project.id, 1);
    await new Promise((r) => setTimeout(r, 30));
    expect(ready(mem, project.id)).toHaveLength(1);
    // What stays is a warm one: the shrink drops those booting at a claim first.
    expect(runtimes()).toEqual(["now"]);
  });

  it("a burst borrows no member the host has no memory for: two sandboxes' limits stay free", async () => {
    // Room for two sandboxes at their 1 GiB limit, less a byte: the pool keeps its own size and no more.
    const free = { bytes: 2 * (1 << 30) - 1 };
    const { mem, pool, project } = setup(2, () => free.bytes);
    for (let i = 0; i < 6; i++) pool.reserve(project, FITS);
    await settled(mem, project.id, 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(mem.pooled(project.id)).toHaveLength(2);
    // Memory freed: the same burst's members are made.
    free.bytes = 2 * (1 << 30);
    await pool.check();
    await settled(mem, project.id, 6);
  });

  it("requests spread out over more than the burst window keep the pool at its size", async () => {
    const { mem, pool, project, clock } = setup(1);
    for (let i = 0; i < 4; i++) {
      const id = pool.reserve(project, FITS);
      if (id) claim(mem, pool, id);
      await settled(mem, project.id, 1);
      clock.now += BURST_WINDOW_MS + 1;
    }
    await new Promise((r) => setTimeout(r, 30));
    expect(ready(mem, project.id)).toHaveLength(1);
    expect(mem.peakBooting(project.id)).toBe(1);
  });

  it("a larger pool's burst stops at eight, its members booting two at a time", async () => {
    const { mem, pool, project } = setup(5);
    for (let i = 0; i < 12; i++) pool.reserve(project, FITS);
    await settled(mem, project.id, 8);
    await new Promise((r) => setTimeout(r, 50));
    expect(mem.pooled(project.id)).toHaveLength(8);
    expect(mem.peakBooting(project.id)).toBe(2);
  });

  it("a member made before the default branch moved, or before the secrets changed, is replaced", async () => {
    const { mem, pool, project, repos, secrets, request } = setup();
    request();
    await settled(mem, project.id, 1);
    const first = ready(mem, project.id)[0]!;

    const moved = repos.advance(project);
    await pool.check();
    expect(mem.container(first.id)).toBeUndefined();
    await settled(mem, project.id, 1);
    const second = ready(mem, project.id)[0]!;
    expect(second.daemon!.seeded!.commit).toBe(moved);

    secrets.set(project.id, { API_KEY: "new-value" });
    await pool.check();
    expect(mem.container(second.id)).toBeUndefined();
    await settled(mem, project.id, 1);
    const third = ready(mem, project.id)[0]!;
    expect(third.env.API_KEY).toBe("new-value");
    const id = request()!;
    expect(pool.take(id)).toMatchObject({ secretsRevision: 1, baseSha: moved });
  });

  it("a member that dies is replaced after two checks it does not answer, not after one", async () => {
    const { mem, pool, project, request } = setup();
    request();
    await settled(mem, project.id, 1);
    const dead = ready(mem, project.id)[0]!;
    mem.kill(dead.id);
    await pool.check();
    expect(mem.container(dead.id)).toBeDefined();
    await pool.check();
    expect(mem.container(dead.id)).toBeUndefined();
    await settled(mem, project.id, 1);
    const id = request();
    expect(id).toBeDefined();
    expect(id).not.toBe(dead.owner.sessionId);
  });

  it("a boot that fails leaves the other one booting under the same top-up: never more than two at once", async () => {
    const { mem, project, logs, request } = setup(3);
    mem.failNext("create", () => undefined);
    mem.failNext("create", new Error("the engine hiccuped"));
    request();
    await until("the failure logged", () => logs.lines.some((l) => l.msg === "warm pool fill failed"));
    // Requests while the first boot is still under way join its top-up; none starts boots beside it. Requests no
    // member fits (another agent): one that took a member already ready on a loaded machine would leave the pool,
    // paused by the failure, short of three for good.
    request({ agent: "plan" });
    request({ agent: "plan" });
    await settled(mem, project.id, 3);
    expect(mem.peakBooting(project.id)).toBeLessThanOrEqual(2);
  });

  it("a member that fails to boot leaves nothing behind", async () => {
    const { mem, project, logs, request } = setup();
    mem.behaviour.afterSeed = "failed";
    request();
    await until("the failure logged", () => logs.lines.some((l) => l.msg === "a pooled sandbox failed"));
    await until("no pooled container", () => mem.pooled(project.id).length === 0);
    expect(request()).toBeUndefined();
  });

  it("boots that keep failing are tried again after twice as long each time; one that succeeds ends the wait", async () => {
    const { mem, pool, project, logs, clock } = setup();
    const creates = () => mem.calls.filter((c) => c.op === "create").length;
    const pauses = () => logs.lines.filter((l) => l.msg === "warm pool paused after a failed boot");
    mem.behaviour.afterSeed = "failed";
    pool.reserve(project, FITS);
    await until("the pool paused", () => pauses().length === 1);
    expect(pauses()[0]).toMatchObject({ extra: { retry_in_s: 120 } });
    const tried = creates();
    // Neither requests nor the timer boot another before the wait is over (a request a minute: no burst).
    clock.now += BURST_WINDOW_MS;
    pool.reserve(project, FITS);
    await pool.check();
    clock.now += 119_000 - BURST_WINDOW_MS;
    await pool.check();
    await new Promise((r) => setTimeout(r, 30));
    expect(creates()).toBe(tried);
    clock.now += 1_001;
    await pool.check();
    await until("the second pause", () => pauses().length === 2);
    expect(pauses()[1]).toMatchObject({ extra: { retry_in_s: 240 } });
    expect(creates()).toBe(tried + 1);
    // Fixed meanwhile: after the longer wait a member boots, and the next failure waits the first wait again.
    mem.behaviour.afterSeed = "ready";
    clock.now += 240_001;
    await pool.check();
    await settled(mem, project.id, 1);
    mem.behaviour.afterSeed = "failed";
    pool.take(pool.reserve(project, FITS)!);
    await until("the third pause", () => pauses().length === 3);
    expect(pauses()[2]).toMatchObject({ extra: { retry_in_s: 120 } });
  });

  it("a project without requests for the idle time gives its pool up, and it is not refilled", async () => {
    const { mem, pool, project, clock } = setup();
    const other = memoryProject();
    pool.reserve(project, FITS);
    await settled(mem, project.id, 1);
    clock.now += IDLE_MS / 2;
    pool.reserve(other, FITS);
    await settled(mem, other.id, 1);
    clock.now += IDLE_MS / 2 + 1;
    await pool.check();
    expect(mem.pooled(project.id)).toHaveLength(0);
    expect(ready(mem, other.id)).toHaveLength(1);
    await pool.check();
    await new Promise((r) => setTimeout(r, 30));
    expect(mem.pooled(project.id)).toHaveLength(0);
  });

  it("stop removes every member; size 0 makes no pool", async () => {
    const { mem, pool, project } = setup();
    pool.reserve(project, FITS);
    await settled(mem, project.id, 1);
    await pool.stop();
    expect(mem.containers()).toHaveLength(0);
    expect(pool.reserve(project, FITS)).toBeUndefined();

    const none = setup(0);
    expect(none.pool.enabled).toBe(false);
    expect(none.pool.reserve(none.project, FITS)).toBeUndefined();
    await new Promise((r) => setTimeout(r, 30));
    expect(none.mem.containers()).toHaveLength(0);
  });
});
