import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinCluster } from "../../orchestrator/cluster.ts";
import { createDockerDriver } from "../../orchestrator/sandbox/docker-driver.ts";
import { BASE_IMAGE, execIn, removeInstallationNetworks } from "../support/docker.ts";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";
import { waitFor } from "../support/wait.ts";

const LIMIT_MB = 20;
const ROTATED = { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } };

/** Nothing a sandbox or an app does fills the engine's disk: logs rotate, a sandbox past SVC_SANDBOX_DISK_MB stops. */
describe("sandbox disk: rotated logs and SVC_SANDBOX_DISK_MB (real Docker)", () => {
  let sp: SandboxedProject;
  let stopBackground: (() => void) | undefined;

  async function running(): Promise<{ sessionId: string; containerId: string }> {
    const created = await sp.sessions("", "POST", {});
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const sessionId = created.body.session_id;
    const session = await waitFor(
      "the session to start",
      async () => {
        const { body } = await sp.sessions(`/${sessionId}`);
        return body.status !== "provisioning" && body;
      },
      { timeoutMs: 120_000 },
    );
    expect(session.status, session.error).toBe("running");
    const [container] = await sp.docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    return { sessionId, containerId: container!.Id };
  }

  beforeAll(async () => {
    sp = await startSandboxedProject("Disk");
    const cluster = await joinCluster(sp.db.sql, { instanceId: sp.api.services.instanceId });
    stopBackground = sp.api.services.startBackgroundWork({
      cluster,
      idleMs: 3_600_000,
      disk: { limitMb: LIMIT_MB, tickMs: 1000 },
    });
  }, 300_000);
  afterAll(async () => {
    stopBackground?.();
    await sp?.close();
  });

  it("every sandbox and app container the driver makes keeps at most 3 rotated log files of 10 MB", async () => {
    const { containerId } = await running();
    expect((await sp.docker.getContainer(containerId).inspect()).HostConfig.LogConfig).toEqual(ROTATED);

    const installationId = randomUUID();
    const driver = createDockerDriver({ servicePort: 8000 });
    const app = await driver.create({
      name: `svc-test-app-${installationId.slice(0, 8)}`,
      image: BASE_IMAGE,
      env: {},
      command: "sleep 600",
      port: 8080,
      owner: { installationId, projectId: sp.project.id, app: "web", deployId: randomUUID() },
      limits: { memoryBytes: 256 * 1024 * 1024, nanoCpus: 500_000_000, pids: 64 },
    });
    try {
      expect((await sp.docker.getContainer(app).inspect()).HostConfig.LogConfig).toEqual(ROTATED);
    } finally {
      await driver.remove(app);
      await removeInstallationNetworks(sp.docker, installationId);
    }
  });

  it("stops a session whose sandbox writes past the limit, with the reason; one under it keeps running", async () => {
    const [filling, quiet] = await Promise.all([running(), running()]);
    // What a fresh sandbox has written (clone, agent state) is well under the limit.
    const before = await createDockerDriver({ servicePort: 8000 }).diskUsage(sp.api.services.installationId);
    for (const usage of before) expect(usage.bytes).toBeLessThan(LIMIT_MB * 1024 * 1024);
    const written = await execIn(sp.docker, filling.containerId, [
      "sh",
      "-c",
      `dd if=/dev/zero of=/workspace/big bs=1M count=${LIMIT_MB * 2} 2>&1`,
    ]);
    expect(written.code, written.out).toBe(0);

    // Within a tick of the watch (1 s here).
    const session = await waitFor(
      "the session to stop",
      async () => {
        const { body } = await sp.sessions(`/${filling.sessionId}`);
        return body.status !== "running" && body;
      },
      { timeoutMs: 5000 },
    );
    expect(session.status).toBe("stopped");
    // The watch may have read the disk while dd was still writing: anything past the limit, up to all of it.
    const reason = new RegExp(
      `^the sandbox's disk use passed SVC_SANDBOX_DISK_MB \\(${LIMIT_MB} MB\\): (\\d+) MB written$`,
    );
    expect(session.error).toMatch(reason);
    const seen = Number(reason.exec(session.error)![1]);
    expect(seen).toBeGreaterThan(LIMIT_MB);
    expect(seen).toBeLessThanOrEqual(LIMIT_MB * 2 + 5);
    const label = `dev.svc.session=${filling.sessionId}`;
    await waitFor(
      "its container to go",
      async () => (await sp.docker.listContainers({ all: true, filters: { label: [label] } })).length === 0,
    );

    await new Promise((r) => setTimeout(r, 1500));
    expect((await sp.sessions(`/${quiet.sessionId}`)).body).toMatchObject({ status: "running", error: null });
  });
});
