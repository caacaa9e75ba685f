import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkSwarm } from "../cli/commands/self-host/doctor.ts";
import { OrchestratorError } from "../orchestrator/errors.ts";
import type { SandboxDriver, SandboxExec, SandboxSpec } from "../orchestrator/sandbox/driver.ts";
import { createSwarmDriver, type SwarmSettings } from "../orchestrator/sandbox/swarm-driver.ts";
import { firewallChain } from "../protocol/host-firewall.ts";
import { freePort } from "../scripts/harness/ports.ts";
import { BASE_IMAGE, ROOT } from "./support/docker.ts";
import { SWARM_STATE_DIR, useSwarm } from "./support/swarm.ts";

const run = promisify(execFile);
const swarm = useSwarm();
const installationId = randomUUID();
const INSTALLATION_LABEL = `dev.svc.installation=${installationId}`;
swarm.cleanUp(INSTALLATION_LABEL);
const LIMITS = { memoryBytes: 256 * 1024 * 1024, nanoCpus: 500_000_000, pids: 128 };
/** A sandbox image that prints a line on each stream and stays up: the daemon's part is not this driver's test. */
const DOCKERFILE = `ARG BASE=${BASE_IMAGE}
FROM \${BASE}
CMD ["sh", "-c", "echo sandbox up; echo on stderr >&2; exec sleep infinity"]
`;
/** The same on a base of a few files (tiny-base in the registry's tests). */
const TINY_DOCKERFILE = `ARG BASE
FROM \${BASE}
CMD ["/bin/sh", "-c", "echo sandbox up; exec /bin/sleep infinity"]
`;
const suffix = installationId.slice(0, 8);
const IMAGE = `svc-swarm-test:${suffix}`;
const REGISTRY_IMAGE = `svc-swarm-test-registry:${suffix}`;
const TINY_BASE = `svc-swarm-test-tiny:${suffix}`;
const images: string[] = [];
let context: string;

const driverWith = (settings: SwarmSettings = {}) =>
  createSwarmDriver({ docker: swarm.docker(), servicePort: 8000, settings: { startTimeoutMs: 30_000, ...settings } });

function sandboxSpec(image: string, extra: Partial<SandboxSpec> = {}): SandboxSpec {
  const sandboxId = randomUUID();
  return {
    name: `svc-swarmtest-${sandboxId.slice(0, 8)}`,
    image,
    env: { SVC_TOKEN: "token-in-the-env", GREETING: "hello" },
    owner: { installationId, sandboxId, sessionId: randomUUID(), projectId: randomUUID() },
    servicePort: 8000,
    limits: LIMITS,
    ...extra,
  };
}

async function collect(exec: SandboxExec): Promise<string> {
  let out = "";
  for await (const chunk of exec.output) out += chunk.data.toString();
  return out;
}

/** The task's container of a service (on this node: the test's swarm has one). */
async function taskContainer(serviceId: string): Promise<string> {
  const tasks = (await swarm.docker().listTasks({ filters: { service: [serviceId] } })) as {
    Status: { ContainerStatus?: { ContainerID?: string } };
  }[];
  const id = tasks[0]?.Status.ContainerStatus?.ContainerID;
  if (!id) throw new Error(`service ${serviceId} has no container yet`);
  return id;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await delay(100);
  }
}

beforeAll(async () => {
  context = mkdtempSync(join(tmpdir(), "svc-swarm-test-"));
  writeFileSync(join(context, "Dockerfile"), DOCKERFILE);
  await driverWith().buildImage({ tag: IMAGE, context: { dir: context, files: ["Dockerfile"] } });
  images.push(IMAGE);
});

afterAll(async () => {
  for (const image of images)
    await swarm
      .docker()
      .getImage(image)
      .remove({ force: true })
      .catch(() => {});
  rmSync(context, { recursive: true, force: true });
});

describe("the tests' swarm (test/support/swarm.ts)", () => {
  it("stays up while this file uses it, whoever else leaves it; entries of dead processes do not count", async () => {
    const script = join(context, "other-user.mts");
    const support = join(ROOT, "test/support/swarm.ts");
    writeFileSync(
      script,
      `import { acquireSwarm, releaseSwarm } from "${support}";\nawait acquireSwarm();\nawait releaseSwarm();\n`,
    );
    // A process that died holding the swarm: its entry is ignored, and removed by the next look.
    const dead = join(SWARM_STATE_DIR, "users", "999999999");
    writeFileSync(dead, "1 1");
    await run(process.execPath, ["--import", "tsx", script], { cwd: ROOT });
    const { stdout } = await run("docker", [
      "info",
      "--format",
      "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}",
    ]);
    expect(stdout.trim()).toBe("active true");
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(join(SWARM_STATE_DIR, "users", String(process.pid)))).toBe(true);
  });
});

describe("the swarm sandbox driver on a one-node swarm", () => {
  let driver: SandboxDriver;
  let spec: SandboxSpec;
  let id: string;

  it("runs a sandbox as a one-task service with its limits and labels, on an overlay network of its own", async () => {
    driver = driverWith();
    spec = sandboxSpec(IMAGE);
    id = await driver.create(spec);
    const started = await driver.start(id);
    expect(started).toMatchObject({ kind: "sandbox", id, name: spec.name, running: true, endpoint: null });
    expect(started.kind === "sandbox" && started.owner).toEqual(spec.owner);

    const docker = swarm.docker();
    const service = await docker.getService(id).inspect();
    const labels = {
      "dev.svc.installation": installationId,
      "dev.svc.sandbox": spec.owner.sandboxId,
      "dev.svc.session": spec.owner.sessionId,
      "dev.svc.project": spec.owner.projectId,
    };
    expect(service.Spec.Labels).toMatchObject(labels);
    expect(service.Spec.Mode).toEqual({ Replicated: { Replicas: 1 } });
    const template = service.Spec.TaskTemplate;
    expect(template.RestartPolicy.Condition).toBe("none");
    expect(template.Resources.Limits).toEqual({
      MemoryBytes: LIMITS.memoryBytes,
      NanoCPUs: LIMITS.nanoCpus,
      Pids: 128,
    });
    expect(template.ContainerSpec.Labels).toMatchObject(labels);
    expect(template.ContainerSpec.Env).toEqual(expect.arrayContaining(["GREETING=hello"]));
    expect(service.Endpoint?.Ports ?? []).toEqual([]);

    // The engine applied them to the task's container (Pids: Docker 20.10 honours Resources.Limits.Pids).
    const container = await docker.getContainer(await taskContainer(id)).inspect();
    expect(container.HostConfig).toMatchObject({
      Memory: LIMITS.memoryBytes,
      NanoCpus: LIMITS.nanoCpus,
      PidsLimit: 128,
    });
    expect(container.Config.Labels).toMatchObject(labels);
    expect(container.HostConfig.CapDrop).toEqual(["ALL"]);

    const networks = Object.keys(container.NetworkSettings.Networks);
    const own = networks.find((n) => n.startsWith("svc-swarm-"));
    expect(own, networks.join(", ")).toBe(`svc-swarm-${spec.owner.sandboxId}`);
    const network = await docker.getNetwork(own!).inspect();
    expect(network).toMatchObject({ Driver: "overlay", Attachable: true, Scope: "swarm" });
    expect(network.Labels).toMatchObject({ "dev.svc.installation": installationId });
  });

  it("lists the installation's sandboxes, reads their logs and environment", async () => {
    expect((await driver.list(installationId)).map((c) => c.id)).toEqual([id]);
    expect(await driver.list(randomUUID())).toEqual([]);
    expect(await driver.inspect(id)).toMatchObject({ running: true, endpoint: null });
    expect(await driver.inspect("no-such-service")).toBeUndefined();
    expect(await driver.environment(id)).toMatchObject({ GREETING: "hello", SVC_TOKEN: "token-in-the-env" });

    const signal = new AbortController().signal;
    const lines = await until("the sandbox's first lines", async () => {
      const got = [];
      for await (const line of await driver.logs(id, { follow: false, signal })) got.push(line);
      return got.length >= 2 ? got : undefined;
    });
    expect(lines).toEqual(
      expect.arrayContaining([
        { stream: "stdout", line: "sandbox up" },
        { stream: "stderr", line: "on stderr" },
      ]),
    );

    // A followed log ends when its reader aborts.
    const abort = new AbortController();
    const followed: string[] = [];
    for await (const line of await driver.logs(id, { follow: true, signal: abort.signal })) {
      followed.push(line.line);
      if (line.line === "sandbox up") abort.abort();
    }
    expect(followed).toContain("sandbox up");
  });

  it("runs commands in a task of this node and measures its disk", async () => {
    const exec = await driver.exec(id, {
      cmd: ["sh", "-c", "echo $GREETING from $(hostname) && head -c 3000000 /dev/zero > /blob && exit 3"],
      tty: false,
      stdin: false,
      workingDir: "/",
      env: [],
    });
    expect(await collect(exec)).toMatch(/^hello from \w+/);
    expect(await exec.exitCode()).toBe(3);
    const usage = await driver.diskUsage(installationId);
    expect(usage).toEqual([{ sandboxId: spec.owner.sandboxId, bytes: expect.any(Number) }]);
    expect(usage[0]!.bytes).toBeGreaterThanOrEqual(3_000_000);
  });

  it("shows a killed task as not running, ends its followed log, and removes service and network", async () => {
    const docker = swarm.docker();
    const container = await taskContainer(id);
    const follow = (async () => {
      const lines = [];
      for await (const line of await driver.logs(id, { follow: true, signal: new AbortController().signal }))
        lines.push(line);
      return lines;
    })();
    await docker.getContainer(container).kill();
    const killedAt = Date.now();
    await until("the sandbox shown as not running", async () =>
      (await driver.inspect(id))?.running === false ? true : undefined,
    );
    expect(Date.now() - killedAt).toBeLessThan(5_000);
    expect((await driver.list(installationId)).find((c) => c.id === id)?.running).toBe(false);
    // The followed log ends by itself once the task has.
    await expect(Promise.race([follow.then(() => "ended"), delay(8_000).then(() => "still open")])).resolves.toBe(
      "ended",
    );
    await expect(
      driver.exec(id, { cmd: ["true"], tty: false, stdin: false, workingDir: "/", env: [] }),
    ).rejects.toThrow(
      /cannot exec: the sandbox service \S+ has no running task \(failed: task: non-zero exit \(137\)\)/,
    );

    await driver.remove(id);
    expect(await driver.inspect(id)).toBeUndefined();
    expect((await docker.listServices({ filters: { label: [INSTALLATION_LABEL] } })).length).toBe(0);
    expect((await docker.listNetworks({ filters: { label: [INSTALLATION_LABEL] } })).map((n) => n.Name)).toEqual([]);
    await driver.remove(id); // gone already: nothing to do
  });

  it("rejects start with the task's own error when the task fails", async () => {
    const missing = await driver.create(sandboxSpec(`svc-swarm-test-missing:${suffix}`));
    const err = await driver.start(missing).catch((e) => e);
    expect(err).toBeInstanceOf(OrchestratorError);
    expect(err.message).toMatch(/^the sandbox service svc-swarmtest-\w+ did not start: rejected: No such image/);
    expect(await driver.inspect(missing)).toMatchObject({ running: false });
    await driver.remove(missing);
  });

  it("fences the host: sandboxes without a list go out through the proxy, builds behind this engine's firewall, apps refused", async () => {
    // No firewall of ours reaches a Swarm node: a sandbox with no egress list gets an internal network too.
    expect(await driver.unlistedEgress()).toBe("proxy");
    const access = { installationId, holder: "7700", ports: [7700] };
    expect(await driver.limitHost(access)).toEqual({ enforced: true });
    const rules = async () => (await run("iptables", ["-w", "-S"])).stdout;
    expect(await rules()).toContain(`-N ${firewallChain(installationId)}`);
    await driver.unlimitHost(access);
    expect(await rules()).not.toContain(`-N ${firewallChain(installationId)}`);

    const before = (await swarm.docker().listServices()).length;
    const app = driver.create({
      name: "svc-swarmtest-app",
      image: IMAGE,
      env: {},
      port: 3000,
      owner: { installationId, projectId: "p", app: "web", deployId: "d" },
      limits: LIMITS,
    });
    await expect(app).rejects.toThrow(/\[\[apps\]\] do not run on the swarm driver yet/);
    expect((await swarm.docker().listServices()).length).toBe(before);
  });

  it("names this node's gateway bridge as the sandboxes' door", async () => {
    const gwbridge = await swarm.docker().getNetwork("docker_gwbridge").inspect();
    expect(await driver.networks(installationId)).toEqual([
      { hostAddress: expect.stringMatching(/^\d+\.\d+\.\d+\.\d+$/), subnet: gwbridge.IPAM?.Config?.[0]?.Subnet },
    ]);
  });

  it("says in doctor that the engine is a Swarm manager", async () => {
    await expect(checkSwarm(true)).resolves.toEqual({
      check: "swarm",
      ok: true,
      detail: "the Docker engine is a Swarm manager (SVC_SANDBOX_DRIVER=swarm)",
    });
  });
});

describe("placement from SVC_SWARM_CONSTRAINTS", () => {
  const label = `svc-test-${suffix}`;
  let node: string;

  beforeAll(async () => {
    node = ((await swarm.docker().info()) as { Swarm: { NodeID: string } }).Swarm.NodeID;
    await run("docker", ["node", "update", "--label-add", `${label}=yes`, node]);
  });
  afterAll(async () => {
    await run("docker", ["node", "update", "--label-rm", label, node]).catch(() => {});
  });

  it("keeps a sandbox whose constraint no node meets pending, and runs one whose constraint the node meets", async () => {
    const unmet = driverWith({ constraints: [`node.labels.${label}==no`], startTimeoutMs: 3_000 });
    const pendingId = await unmet.create(sandboxSpec(IMAGE));
    const startedAt = Date.now();
    await expect(unmet.start(pendingId)).rejects.toThrow(
      /did not start within 3 s: its task is pending: no suitable node \(scheduling constraints? not satisfied on 1 node/,
    );
    expect(Date.now() - startedAt).toBeLessThan(6_000);
    expect(await unmet.inspect(pendingId)).toMatchObject({ running: false });
    const spec = (await swarm.docker().getService(pendingId).inspect()).Spec.TaskTemplate.Placement;
    expect(spec.Constraints).toEqual([`node.labels.${label}==no`]);
    await unmet.remove(pendingId);

    const met = driverWith({ constraints: [`node.labels.${label}==yes`], spread: [`node.labels.${label}`] });
    const runningId = await met.create(sandboxSpec(IMAGE));
    expect(await met.start(runningId)).toMatchObject({ running: true });
    const placement = (await swarm.docker().getService(runningId).inspect()).Spec.TaskTemplate.Placement;
    expect(placement.Preferences).toEqual([{ Spread: { SpreadDescriptor: `node.labels.${label}` } }]);
    await met.remove(runningId);
  });
});

describe("images through a registry (SVC_REGISTRY)", () => {
  let registry: string;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-swarm-registry-"));
    registry = `127.0.0.1:${await freePort()}`;
    await run("bash", [join(ROOT, "scripts/registry.sh"), "start", "--addr", registry, "--dir", dir]);
    // A 2 MB base (the host's sh, sleep and libc) rather than the 240 MB sandbox base: a push of that takes ~15 s.
    images.push(TINY_BASE);
    const files = "bin/sh bin/sleep lib64/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/libc.so.6";
    await run("bash", ["-c", `set -o pipefail; tar -C / -ch ${files} | docker import - ${TINY_BASE}`]);
    writeFileSync(join(dir, "Dockerfile"), TINY_DOCKERFILE);
    images.push(REGISTRY_IMAGE, `${registry}/${REGISTRY_IMAGE}`);
    await driverWith({ registry }).buildImage({
      tag: REGISTRY_IMAGE,
      context: { dir, files: ["Dockerfile"] },
      buildArgs: { BASE: TINY_BASE },
    });
  });
  afterAll(async () => {
    await run("bash", [join(ROOT, "scripts/registry.sh"), "stop", "--addr", registry, "--dir", dir]).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it("pushes what it builds, and runs the service from the registry's name", async () => {
    const driver = driverWith({ registry });
    const pushedName = `${registry}/${REGISTRY_IMAGE}`;
    const catalog = (await (await fetch(`http://${registry}/v2/_catalog`)).json()) as { repositories: string[] };
    expect(catalog.repositories).toContain("svc-swarm-test-registry");
    expect(await driver.imageExists(REGISTRY_IMAGE)).toBe(true);
    // Built here but never pushed: not there for other nodes, so not there for this driver.
    expect(await driver.imageExists(IMAGE)).toBe(false);

    // The node must pull it: its registry-named copy is gone from this engine.
    await swarm.docker().getImage(pushedName).remove();
    const id = await driver.create(sandboxSpec(REGISTRY_IMAGE));
    expect(await driver.start(id)).toMatchObject({ running: true });
    const service = await swarm.docker().getService(id).inspect();
    expect(service.Spec.TaskTemplate.ContainerSpec.Image).toBe(pushedName);
    await expect(swarm.docker().getImage(pushedName).inspect()).resolves.toBeTruthy();
    await driver.remove(id);
  });

  describe("on two nodes: a second engine of this machine joined as a worker (scripts/swarm-node2.sh)", () => {
    const zone = `svc-test-zone-${suffix}`;
    const NODE2 = join(ROOT, "scripts/swarm-node2.sh");
    let manager: string;
    let node2: string;
    /** The node a service's task was placed on. */
    const nodeOf = async (serviceId: string) =>
      ((await swarm.docker().listTasks({ filters: { service: [serviceId] } })) as { NodeID: string }[])[0]?.NodeID;
    const availability = (state: "active" | "pause") =>
      run("docker", ["node", "update", "--availability", state, node2]);

    beforeAll(async () => {
      manager = ((await swarm.docker().info()) as { Swarm: { NodeID: string } }).Swarm.NodeID;
      node2 = (await run("bash", [NODE2, "start"])).stdout.trim();
      // Paused but while this file places its own services: another test file's services must not land on a node
      // that holds none of their images.
      await availability("pause");
      await run("docker", ["node", "update", "--label-add", `${zone}=a`, manager]);
      await run("docker", ["node", "update", "--label-add", `${zone}=b`, node2]);
    });
    afterAll(async () => {
      await run("docker", ["node", "update", "--label-rm", zone, manager]).catch(() => {});
      await run("bash", [NODE2, "stop"]);
    });

    it("places sandboxes by constraint and spreads them by preference over both nodes, pulling from the registry", async () => {
      const byZone = (z: string) => driverWith({ registry, constraints: [`node.labels.${zone}==${z}`] });
      const spread = driverWith({ registry, spread: [`node.labels.${zone}`] });
      const inA = byZone("a");
      const inB = byZone("b");
      await availability("active");
      let ids: { a: string; b: string; spread: string[] };
      try {
        ids = {
          a: await inA.create(sandboxSpec(REGISTRY_IMAGE)),
          b: await inB.create(sandboxSpec(REGISTRY_IMAGE)),
          spread: [await spread.create(sandboxSpec(REGISTRY_IMAGE)), await spread.create(sandboxSpec(REGISTRY_IMAGE))],
        };
        for (const id of [ids.a, ids.b, ...ids.spread]) await until(`service ${id} placed`, () => nodeOf(id));
      } finally {
        await availability("pause");
      }
      // Node 2 had none of the image: it pulled it from the registry, by the name the manager pushed.
      for (const id of [ids.a, ids.b, ...ids.spread])
        expect(await driverWith().start(id)).toMatchObject({ running: true, endpoint: null });
      expect(await nodeOf(ids.a)).toBe(manager);
      expect(await nodeOf(ids.b)).toBe(node2);
      expect(new Set(await Promise.all(ids.spread.map(nodeOf)))).toEqual(new Set([manager, node2]));

      // On the other node: logs through the manager, the environment from the service; no exec, no disk measure.
      const driver = driverWith({ registry });
      const signal = new AbortController().signal;
      const lines = await until("node 2's first line", async () => {
        const got = [];
        for await (const line of await driver.logs(ids.b, { follow: false, signal })) got.push(line.line);
        return got.length > 0 ? got : undefined;
      });
      expect(lines).toEqual(["sandbox up"]);
      expect(await driver.environment(ids.b)).toMatchObject({ GREETING: "hello" });
      await expect(
        driver.exec(ids.b, { cmd: ["true"], tty: false, stdin: false, workingDir: "/", env: [] }),
      ).rejects.toThrow(
        /cannot exec here: the sandbox service \S+ runs on another Swarm node .* goes over the sandbox daemon's link/,
      );
      const measured = (await driver.diskUsage(installationId)).map((u) => u.sandboxId);
      const owners = await Promise.all([ids.a, ids.b].map(async (id) => (await driver.inspect(id))!));
      expect(measured).toContain(owners[0]!.kind === "sandbox" && owners[0]!.owner.sandboxId);
      expect(measured).not.toContain(owners[1]!.kind === "sandbox" && owners[1]!.owner.sandboxId);

      for (const id of [ids.a, ids.b, ...ids.spread]) await driver.remove(id);
      expect((await swarm.docker().listNetworks({ filters: { label: [INSTALLATION_LABEL] } })).length).toBe(0);
    });
  });
});
