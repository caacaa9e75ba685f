import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemoryDriver } from "../test/support/memory-driver.ts";
import { memoryProject, memoryProvisionerDeps, memorySession } from "../test/support/memory-ports.ts";
import { createIdleSweeper } from "./idle-sweeper.ts";
import { createProvisioner } from "./provisioning/provisioner.ts";

const IDLE_MS = 5 * 60_000;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

afterEach(() => vi.unstubAllGlobals());

async function setup() {
  const mem = createMemoryDriver();
  vi.stubGlobal("fetch", mem.fetch);
  const world = memoryProvisionerDeps(mem.driver);
  const provisioner = createProvisioner(world.deps);
  const sweep = createIdleSweeper({
    records: world.records.records,
    provisioner,
    idleMs: IDLE_MS,
    log: world.logs.log,
  });
  const project = memoryProject();
  /** A running session whose daemon reports `daemon`. */
  async function running(daemon: { lastActivityAt: string; busy?: boolean; answering?: boolean }) {
    const session = memorySession(project);
    world.records.addSession(session, { provisioner: "me" });
    await provisioner.provision(project, session, { cutBranch: true });
    const container = mem.sandboxOf({ sessionId: session.session_id })!;
    Object.assign(container.daemon!, daemon);
    const sandbox = world.records.sandboxesOf(session.session_id)[0]!;
    return { id: session.session_id, container, sandbox };
  }
  return { mem, sweep, running, ...world };
}

describe("idle sweeper", () => {
  it("stops sessions idle past the limit and removes their sandboxes; busy, recent and silent ones stay", async () => {
    const { mem, sweep, running, records, tokens } = await setup();
    const idle = await running({ lastActivityAt: ago(IDLE_MS + 60_000) });
    const recent = await running({ lastActivityAt: ago(IDLE_MS - 60_000) });
    const busy = await running({ lastActivityAt: ago(IDLE_MS * 3), busy: true });
    // A daemon that does not answer is the reconciler's business, not idleness.
    const silent = await running({ lastActivityAt: ago(IDLE_MS * 3), answering: false });

    expect(await sweep()).toEqual([idle.id]);

    expect(records.session(idle.id)).toMatchObject({ status: "stopped", error: null });
    expect(records.sandbox(idle.sandbox.sandbox_id)!.status).toBe("stopped");
    expect(mem.container(idle.container.id)).toBeUndefined();
    expect(tokens.isLive(idle.sandbox.token_id!)).toBe(false);
    for (const kept of [recent, busy, silent]) {
      expect(records.session(kept.id)!.status).toBe("running");
      expect(mem.container(kept.container.id)?.running).toBe(true);
      expect(tokens.isLive(kept.sandbox.token_id!)).toBe(true);
    }
  });

  it("records each answering daemon's last activity", async () => {
    const { sweep, running, records } = await setup();
    const at = ago(1000);
    const recent = await running({ lastActivityAt: at });
    await sweep();
    expect(records.sandbox(recent.sandbox.sandbox_id)!.last_activity_at).toBe(at);
  });

  it("leaves a session another path already stopped to that path", async () => {
    const { mem, sweep, running, records } = await setup();
    const idle = await running({ lastActivityAt: ago(IDLE_MS * 2) });
    // Stopped by a user a moment ago: the stop tears its sandbox down, not the sweep.
    records.setStatus(idle.id, "stopped");
    expect(await sweep()).toEqual([]);
    expect(mem.container(idle.container.id)).toBeDefined();
  });
});
