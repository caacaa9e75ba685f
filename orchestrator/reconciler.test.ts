import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemoryDriver } from "../test/support/memory-driver.ts";
import { memoryCluster, memoryProject, memoryProvisionerDeps, memorySession } from "../test/support/memory-ports.ts";
import { waitFor } from "../test/support/wait.ts";
import { createProvisioner } from "./provisioning/provisioner.ts";
import { createReconciler } from "./reconciler.ts";

afterEach(() => vi.unstubAllGlobals());

function setup() {
  const mem = createMemoryDriver();
  vi.stubGlobal("fetch", mem.fetch);
  const world = memoryProvisionerDeps(mem.driver, { instanceId: "me" });
  const provisioner = createProvisioner(world.deps);
  const cluster = memoryCluster("me");
  cluster.alive.add("other-live");
  const reconcile = createReconciler({
    driver: mem.driver,
    records: world.records.records,
    provisioner,
    installationId: "inst",
    isAlive: cluster.isAlive,
    log: world.logs.log,
  });
  const project = memoryProject();
  const owner = (sessionId: string = randomUUID(), sandboxId: string = randomUUID()) => ({
    installationId: "inst",
    projectId: project.id,
    sessionId,
    sandboxId,
  });
  /** A session row, its sandbox row and (unless `container: false`) its container, as a process left them. */
  function sessionWith(options: {
    status: "provisioning" | "running";
    sandbox: "provisioning" | "active";
    provisioner: string | null;
    container?: "running" | "exited" | false;
    /** False: the container exists but the row does not name it yet (its create was still in flight). */
    recorded?: boolean;
  }) {
    const session = memorySession(project, { status: options.status });
    world.records.addSession(session, { provisioner: options.provisioner });
    const sandboxId = randomUUID();
    const token = { id: randomUUID() };
    world.tokens.minted.push({
      ...token,
      token: "t",
      userId: "u",
      projectId: project.id,
      sessionId: session.session_id,
    });
    const container =
      options.container === false
        ? undefined
        : mem.adopt({ owner: owner(session.session_id, sandboxId), running: options.container !== "exited" });
    world.records.addSandbox({
      sandbox_id: sandboxId,
      session_id: session.session_id,
      project_id: project.id,
      status: options.sandbox,
      container_id: options.recorded === false ? null : (container?.id ?? null),
      token_id: token.id,
    });
    return { session, sandboxId, container, tokenId: token.id };
  }
  return { mem, provisioner, reconcile, project, owner, sessionWith, cluster, ...world };
}

describe("reconciler", () => {
  it("removes containers without a live sandbox row, and leaves another installation's and the apps' alone", async () => {
    const { mem, reconcile, owner, sessionWith, project } = setup();
    const orphan = mem.adopt({ owner: owner() });
    // This installation's, but with no sandbox recorded on it.
    const unlabelled = mem.adopt({ owner: { installationId: "inst" } });
    const foreign = mem.adopt({ owner: { ...owner(), installationId: "another-stack" } });
    const kept = sessionWith({ status: "running", sandbox: "active", provisioner: "me", container: "running" });
    // An app's container has no sandbox row: the app deployer's to keep or remove.
    const app = await mem.driver.create({
      name: "svc-app-web",
      image: "svc-app:test",
      env: {},
      port: 3000,
      owner: { installationId: "inst", projectId: project.id, app: "web", deployId: randomUUID() },
      limits: { memoryBytes: 1, nanoCpus: 1, pids: 1 },
    });

    const result = await reconcile();

    expect(mem.container(orphan.id)).toBeUndefined();
    expect(mem.container(unlabelled.id)).toBeUndefined();
    expect(mem.container(foreign.id)).toBeDefined();
    expect(mem.container(kept.container!.id)?.running).toBe(true);
    expect(mem.container(app)).toBeDefined();
    expect(result).toEqual({ removedContainers: 2, closedSandboxes: 0, failedSessions: 0 });
  });

  it("leaves a live process's pooled sandboxes without a session row alone, and removes a dead process's", async () => {
    const { mem, reconcile, owner, records, project } = setup();
    const livePool = mem.adopt({ owner: owner(), pool: "other-live" });
    const minePool = mem.adopt({ owner: owner(), pool: "me" });
    const deadPool = mem.adopt({ owner: owner(), pool: "dead-process" });
    // Claimed once (its session has a row) but that sandbox is no longer live: nothing holds it any more.
    const claimed = memorySession(project, { status: "stopped" });
    records.addSession(claimed, { provisioner: "other-live" });
    const claimedOwner = owner(claimed.session_id);
    records.addSandbox({
      sandbox_id: claimedOwner.sandboxId,
      session_id: claimed.session_id,
      project_id: project.id,
      status: "stopped",
    });
    const stale = mem.adopt({ owner: claimedOwner, pool: "other-live" });

    await reconcile();

    expect(mem.container(livePool.id)).toBeDefined();
    expect(mem.container(minePool.id)).toBeDefined();
    expect(mem.container(deadPool.id)).toBeUndefined();
    expect(mem.container(stale.id)).toBeUndefined();
  });

  it("fails sessions a dead process left provisioning, closes their sandboxes and removes their containers", async () => {
    const { mem, reconcile, records, tokens, sessionWith, project } = setup();
    const dead = sessionWith({ status: "provisioning", sandbox: "provisioning", provisioner: "dead-process" });
    // A dead process that got no further than the session row.
    const early = memorySession(project);
    records.addSession(early, { provisioner: "dead-process" });
    // Killed while its create request was in flight: the engine made the container, the row never named it.
    const inFlight = sessionWith({
      status: "provisioning",
      sandbox: "provisioning",
      provisioner: "dead-process",
      recorded: false,
    });
    const otherLive = sessionWith({ status: "provisioning", sandbox: "provisioning", provisioner: "other-live" });

    const result = await reconcile();

    expect(mem.container(inFlight.container!.id)).toBeUndefined();
    for (const id of [dead.session.session_id, early.session_id, inFlight.session.session_id]) {
      expect(records.session(id)).toMatchObject({ status: "failed", error: "provisioning was interrupted" });
    }
    expect(records.sandbox(dead.sandboxId)).toMatchObject({ status: "error", error: "provisioning was interrupted" });
    expect(mem.container(dead.container!.id)).toBeUndefined();
    expect(tokens.isLive(dead.tokenId)).toBe(false);

    // Another live process's provisioning is its own business.
    expect(records.session(otherLive.session.session_id)!.status).toBe("provisioning");
    expect(records.sandbox(otherLive.sandboxId)!.status).toBe("provisioning");
    expect(mem.container(otherLive.container!.id)).toBeDefined();
    expect(tokens.isLive(otherLive.tokenId)).toBe(true);
    // The recorded container went with the sandbox closed; the unrecorded one as an orphan, on the second look.
    expect(result).toEqual({ removedContainers: 1, closedSandboxes: 2, failedSessions: 3 });
  });

  it("leaves a session this process is provisioning alone, whatever process its row names", async () => {
    const { mem, reconcile, records, provisioner, project } = setup();
    mem.behaviour.clone = "cloning";
    const session = memorySession(project);
    records.addSession(session, { provisioner: null });
    const provisioning = provisioner.provision(project, session, { cutBranch: true });
    await waitFor("its container", async () => mem.sandboxOf({ sessionId: session.session_id })?.running, {
      everyMs: 5,
    });

    expect(await reconcile()).toEqual({ removedContainers: 0, closedSandboxes: 0, failedSessions: 0 });
    const container = mem.sandboxOf({ sessionId: session.session_id })!;
    container.daemon!.repo.state = "cloned";
    await provisioning;
    expect(records.session(session.session_id)!.status).toBe("running");
  });

  it("closes an active sandbox whose container is gone or stopped: the session fails with the reason", async () => {
    const { mem, reconcile, records, tokens, sessionWith, closed } = setup();
    const gone = sessionWith({ status: "running", sandbox: "active", provisioner: "me", container: false });
    const exited = sessionWith({ status: "running", sandbox: "active", provisioner: "me", container: "exited" });

    const result = await reconcile();

    for (const [s, error] of [
      [gone, "the sandbox container is gone"],
      [exited, "the sandbox stopped unexpectedly"],
    ] as const) {
      expect(records.session(s.session.session_id)).toMatchObject({ status: "failed", error });
      expect(records.sandbox(s.sandboxId)!.status).toBe("error");
      expect(tokens.isLive(s.tokenId)).toBe(false);
    }
    expect(mem.container(exited.container!.id)).toBeUndefined();
    expect(closed).toEqual(expect.arrayContaining([gone.session.session_id, exited.session.session_id]));
    expect(result.closedSandboxes).toBe(2);
  });
});
