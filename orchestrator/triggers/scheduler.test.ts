import { afterEach, describe, expect, it } from "vitest";
import type { TriggerSpec } from "../../protocol/manifest.ts";
import { memoryTriggers } from "../../test/support/memory-ports.ts";
import { waitFor } from "../../test/support/wait.ts";
import type { TriggerPort } from "../ports.ts";
import { createTriggerScheduler, type TriggerScheduler } from "./scheduler.ts";

const EVERY_SECOND = "* * * * * *";
const trigger = (over: Partial<TriggerSpec> = {}): TriggerSpec => ({
  slug: "tick",
  schedule: EVERY_SECOND,
  prompt: "p",
  enabled: true,
  ...over,
});

/** A port over memory: claims are a set, as the unique row is in the database. */
function memoryPort(triggers: TriggerSpec[], state: { since: Date; lastClaimed: Date | null }) {
  const claims = new Set<string>();
  const fired: { slug: string; at: Date }[] = [];
  const port: TriggerPort = {
    projects: async () => [{ projectId: "p1", triggers }],
    project: async () => ({ projectId: "p1", triggers }),
    scheduled: async () => state,
    movedSince: async () => ({ projectIds: [], cursor: new Date().toISOString() }),
    claim: async (_p, slug, at) => {
      const key = `${slug}@${at.toISOString()}`;
      if (claims.has(key)) return false;
      claims.add(key);
      return true;
    },
    fire: async (_p, t, at) => {
      fired.push({ slug: t.slug, at });
      return { sessionId: `s${fired.length}` };
    },
  };
  return { port, fired, triggers };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let running: TriggerScheduler[] = [];
afterEach(() => {
  for (const s of running) s.stop();
  running = [];
});
function start(port: TriggerPort, lead: () => Promise<boolean> = async () => true, catchUpMs = 5000) {
  const s = createTriggerScheduler({ port, log: () => {}, catchUpMs, leadCheckMs: 100, resyncMs: 60_000 });
  running.push(s);
  return s.start(lead).then(() => s);
}

describe("trigger scheduler", () => {
  it("catches up only the single most recent missed instant, and none from before the schedule started", async () => {
    const now = Date.now();
    const mem = memoryPort([trigger({ schedule: "0 0 1 1 *" })], {
      since: new Date(now - 3_600_000),
      lastClaimed: null,
    });
    // Nothing matched in the window: nothing fires.
    await start(mem.port);
    await sleep(300);
    expect(mem.fired).toEqual([]);

    // Every second, missed for an hour: exactly one catch-up, at the latest whole second (then the live job runs).
    const every = memoryPort([trigger()], { since: new Date(now - 3_600_000), lastClaimed: null });
    const started = Date.now();
    await start(every.port);
    await sleep(50);
    expect(every.fired.length).toBeGreaterThanOrEqual(1);
    const first = every.fired[0]!.at.getTime();
    expect(first % 1000).toBe(0);
    expect(started - first).toBeLessThan(1000);
    expect(new Set(every.fired.map((f) => f.at.getTime())).size).toBe(every.fired.length);

    // A schedule that started just now has nothing to catch up.
    const fresh = memoryPort([trigger({ schedule: "0 0 1 1 *" })], { since: new Date(), lastClaimed: null });
    await start(fresh.port);
    expect(fresh.fired).toEqual([]);
  });

  it("skips a trigger whose time zone is unknown and schedules the others", async () => {
    const mem = memoryPort([trigger({ slug: "bad", timezone: "Mars/Olympus" }), trigger({ slug: "good" })], {
      since: new Date(),
      lastClaimed: null,
    });
    const s = await start(mem.port);
    expect(s.scheduledSlugs("p1")).toEqual(["good"]);
  });

  it("two schedulers sharing the claims fire each instant once; disabled triggers get no job", async () => {
    const mem = memoryPort([trigger(), trigger({ slug: "off", enabled: false })], {
      since: new Date(),
      lastClaimed: null,
    });
    const a = await start(mem.port);
    const b = await start(mem.port);
    await sleep(2500);
    a.stop();
    b.stop();
    expect(a.scheduledSlugs("p1")).toEqual([]);
    const instants = mem.fired.map((f) => f.at.toISOString());
    expect(instants.length).toBeGreaterThanOrEqual(2);
    expect(new Set(instants).size).toBe(instants.length);
    expect(mem.fired.every((f) => f.slug === "tick")).toBe(true);
  });

  it("fires an instant a blocked event loop made node-cron skip (over 1 s late), once", async () => {
    const mem = memoryPort([trigger({ schedule: "*/5 * * * * *" })], { since: new Date(), lastClaimed: null });
    await start(mem.port);
    while (mem.fired.length === 0) await sleep(20);
    const slot = mem.fired[0]!.at.getTime();
    await sleep(slot + 4500 - Date.now());
    while (Date.now() < slot + 7300) {
      // busy: the instant slot + 5 s passes while no timer can run
    }
    await sleep(500);
    expect(mem.fired.map((f) => f.at.getTime())).toEqual([slot, slot + 5000]);
  });

  it("follows leadership and replaces a project's jobs on reload", async () => {
    let leads = false;
    const triggers = [trigger({ schedule: "0 0 1 1 *" })];
    const mem = memoryPort(triggers, { since: new Date(), lastClaimed: null });
    const s = await start(mem.port, async () => leads);
    expect(s.scheduledSlugs("p1")).toEqual([]);
    leads = true;
    await sleep(300);
    expect(s.scheduledSlugs("p1")).toEqual(["tick"]);
    triggers.splice(0, 1, trigger({ slug: "other", schedule: "0 0 1 1 *" }));
    await s.reload("p1");
    expect(s.scheduledSlugs("p1")).toEqual(["other"]);
    leads = false;
    await sleep(300);
    expect(s.scheduledSlugs("p1")).toEqual([]);
  });

  it("picks up a manifest change another API process received (movedSince) within a lead check", async () => {
    const mem = memoryTriggers();
    mem.setTriggers("p1", [trigger({ schedule: "0 0 1 1 *" })]);
    const s = createTriggerScheduler({ port: mem.port, log: () => {}, leadCheckMs: 50, resyncMs: 60_000 });
    running.push(s);
    await s.start(async () => true);
    expect(s.scheduledSlugs("p1")).toEqual(["tick"]);
    // A merge on another process: only the moved-branch feed tells this one, long before the next resync.
    mem.setTriggers("p1", [trigger({ slug: "other", schedule: "0 0 1 1 *" })]);
    await waitFor("the new job", async () => s.scheduledSlugs("p1").join() === "other", {
      timeoutMs: 2000,
      everyMs: 10,
    });
  });
});
