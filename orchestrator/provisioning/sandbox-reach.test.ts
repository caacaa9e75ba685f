import { afterEach, describe, expect, it, vi } from "vitest";
import { hashSecret } from "../../protocol/credential.ts";
import { createMemoryDriver } from "../../test/support/memory-driver.ts";
import { memoryProject, memoryProvisionerDeps, memorySession } from "../../test/support/memory-ports.ts";
import { waitFor } from "../../test/support/wait.ts";
import type { SandboxLinkPort } from "../ports.ts";
import { createProvisioner, type Provisioner } from "./provisioner.ts";

const FITS = { baseRef: "main", agent: "build", model: null };
const LINK_URL = "ws://api.invalid:7700/svc/v1/sandbox-link";

let provisioners: Provisioner[] = [];
afterEach(async () => {
  await Promise.all(provisioners.map((p) => p.stopPool()));
  provisioners = [];
  vi.unstubAllGlobals();
});

/**
 * SVC_SANDBOX_LINK=dial-out over the in-memory engine: the driver reports no address for a sandbox (as a sandbox
 * that publishes no port has none), and the links stand in for the API's: a started sandbox whose key was announced
 * "dials in" and is reached at its memory daemon. Every announcement is checked against the driver's starts.
 */
function setup(poolSize = 0, linked = true) {
  const mem = createMemoryDriver();
  vi.stubGlobal("fetch", mem.fetch);
  const expected = new Map<string, string>();
  const forgotten: string[] = [];
  const startedUnannounced: string[] = [];
  const driver = {
    ...mem.driver,
    async start(id: string) {
      const container = mem.containers().find((c) => c.id === id)!;
      if (expected.get(hashSecret(container.env.SVC_TOKEN!)) !== container.owner.sandboxId) startedUnannounced.push(id);
      return { ...(await mem.driver.start(id)), endpoint: null };
    },
  };
  const links: SandboxLinkPort = {
    expect: (hash, sandboxId) => void expected.set(hash, sandboxId),
    forget: (sandboxId) => void forgotten.push(sandboxId),
    async waitFor(sandboxId) {
      const container = mem.containers().find((c) => c.owner.sandboxId === sandboxId && c.running);
      if (!linked || !container || container.env.SVC_LINK_URL !== LINK_URL)
        throw new Error("the sandbox's daemon did not link to the API within 5 s");
      return `${(await mem.driver.inspect(container.id))!.endpoint}`;
    },
  };
  const world = memoryProvisionerDeps(driver, { settings: { poolSize, sandboxLink: "dial-out" } });
  const provisioner = createProvisioner({ ...world.deps, links });
  provisioners.push(provisioner);
  const project = memoryProject();
  const newSession = (over: Parameters<typeof memorySession>[1] = {}) => {
    const session = memorySession(project, over);
    world.records.addSession(session, { provisioner: "me" });
    return session;
  };
  return { mem, provisioner, project, newSession, forgotten, startedUnannounced, ...world };
}

describe("provisioner, daemons dialing out", () => {
  it("cold: the sandbox gets SVC_LINK_URL, its key is announced before it starts, its link's endpoint is its URL", async () => {
    const { mem, provisioner, project, newSession, records, forgotten, startedUnannounced } = setup();
    const session = newSession();
    await provisioner.provision(project, session, { cutBranch: true });

    const container = mem.sandboxOf({ sessionId: session.session_id })!;
    expect(container.env.SVC_LINK_URL).toBe(LINK_URL);
    expect(startedUnannounced).toEqual([]);
    const row = records.session(session.session_id)!;
    expect(row).toMatchObject({ status: "running", error: null });
    expect(row.sandbox_url).toBe((await mem.driver.inspect(container.id))!.endpoint);

    await provisioner.stopSandboxOf(session.session_id);
    expect(forgotten).toEqual([container.owner.sandboxId]);
  });

  it("pooled: a member is announced before it starts and reached through its link, claimed and discarded alike", async () => {
    const { mem, provisioner, project, newSession, records, forgotten, startedUnannounced } = setup(1);
    provisioner.reservePooled(project, FITS);
    await waitFor("a warm sandbox", async () => mem.pooled(project.id, "ready").length === 1, { timeoutMs: 5000 });
    const id = provisioner.reservePooled(project, FITS)!;
    const warm = mem.sandboxOf({ sessionId: id })!;
    expect(warm.env.SVC_LINK_URL).toBe(LINK_URL);

    const session = newSession({ session_id: id, branch: id });
    await provisioner.provision(project, session, { cutBranch: true });
    expect(records.session(id)).toMatchObject({ status: "running" });
    expect(warm.daemon!.pool).toBe("claimed");
    expect(startedUnannounced).toEqual([]);
    // The claimed member's link stays; the pool's replacement goes with the pool.
    expect(forgotten).toEqual([]);
    // Two reservations in a minute are a burst: the pool grows to two.
    await waitFor("replacements", async () => mem.pooled(project.id, "ready").length === 2, { timeoutMs: 5000 });
    const spare = mem.pooled(project.id, "ready").map((c) => c.owner.sandboxId);
    await provisioner.stopPool();
    expect(forgotten.sort()).toEqual(spare.sort());
  });

  it("pooled: a member that died after the pool's last look is discarded, and a cold sandbox links in its place", async () => {
    const { mem, provisioner, project, newSession, records } = setup(1);
    provisioner.reservePooled(project, FITS);
    await waitFor("a warm sandbox", async () => mem.pooled(project.id, "ready").length === 1, { timeoutMs: 5000 });
    const id = provisioner.reservePooled(project, FITS)!;
    const dead = mem.sandboxOf({ sessionId: id })!;
    dead.daemon!.answering = false;

    await provisioner.provision(project, newSession({ session_id: id, branch: id }), { cutBranch: true });
    expect(records.session(id)).toMatchObject({ status: "running", error: null });
    const cold = mem.sandboxOf({ sessionId: id })!;
    expect(cold.id).not.toBe(dead.id);
    expect(cold.pool).toBeNull();
    expect(cold.env.SVC_LINK_URL).toBe(LINK_URL);
  });

  it("a sandbox whose daemon never links fails its session, and nothing of it is left", async () => {
    const { mem, provisioner, project, newSession, records, forgotten } = setup(0, false);
    const session = newSession();
    await provisioner.provision(project, session, { cutBranch: true });
    expect(records.session(session.session_id)).toMatchObject({
      status: "failed",
      error: expect.stringContaining("did not link to the API"),
    });
    expect(mem.containers()).toEqual([]);
    expect(forgotten).toHaveLength(1);
  });

  it("refuses dial-out without the API's links", () => {
    const { deps } = memoryProvisionerDeps(createMemoryDriver().driver, { settings: { sandboxLink: "dial-out" } });
    expect(() => createProvisioner(deps)).toThrow(/needs the API's sandbox links/);
  });
});
