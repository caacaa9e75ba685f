import { randomUUID } from "node:crypto";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDockerDriver } from "../../orchestrator/sandbox/docker-driver.ts";
import { call } from "../support/api-server.ts";
import { execDetached, execIn } from "../support/docker.ts";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";

/** Connects to each host:port from inside a container at once; each answers connected, a socket error code or timeout. */
const PROBE = `
const net = require("node:net");
const targets = JSON.parse(process.argv[1]);
Promise.all(targets.map(([host, port]) => new Promise((resolve) => {
  const socket = net.connect({ host, port });
  const done = (result) => { socket.destroy(); resolve(result); };
  socket.setTimeout(1500, () => done("timeout"));
  socket.on("connect", () => done("connected"));
  socket.on("error", (err) => done(err.code));
}))).then((results) => console.log(JSON.stringify(results)));
`;

describe("sandboxes are isolated from each other (real Docker)", () => {
  let sandboxed: SandboxedProject;
  let docker: Docker;
  const sandboxes: { sessionId: string; url: string; containerId: string }[] = [];

  async function probe(containerId: string, targets: [string, number][]): Promise<string[]> {
    const res = await execIn(docker, containerId, ["node", "-e", PROBE, JSON.stringify(targets)]);
    expect(res.code, res.out).toBe(0);
    return JSON.parse(res.out.trim().split("\n").at(-1)!);
  }

  async function waitRunning(id: string) {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { body } = await sandboxed.sessions(`/${id}`);
      if (body.status === "running") return body;
      if (body.status === "failed" || Date.now() > deadline)
        throw new Error(`session ${id}: ${body.status} ${body.error}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Isolation");
    docker = sandboxed.docker;
    const created = await Promise.all([1, 2].map(() => sandboxed.sessions("", "POST", {})));
    for (const { body } of created) {
      const session = await waitRunning(body.session_id);
      const [container] = await docker.listContainers({
        filters: { label: [`dev.svc.session=${session.session_id}`] },
      });
      sandboxes.push({ sessionId: session.session_id, url: session.sandbox_url, containerId: container!.Id });
    }
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
  });

  it("a sandbox reaches the API on host.docker.internal but none of another sandbox's ports", async () => {
    const [a, b] = sandboxes as [(typeof sandboxes)[0], (typeof sandboxes)[0]];
    // An app in B on the preview port, next to its daemon on 8000.
    await execDetached(docker, b.containerId, [
      "node",
      "-e",
      "require('node:http').createServer((q, r) => r.end('b-app')).listen(3000)",
    ]);
    await expect
      .poll(async () => (await probe(b.containerId, [["127.0.0.1", 3000]]))[0], { timeout: 10_000 })
      .toBe("connected");

    const bNet = Object.values((await docker.getContainer(b.containerId).inspect()).NetworkSettings.Networks)[0]!;
    const aNet = Object.values((await docker.getContainer(a.containerId).inspect()).NetworkSettings.Networks)[0]!;
    const bPublished = Number(new URL(b.url).port);
    const apiPort = Number(new URL(sandboxed.api.url).port);
    const started = Date.now();
    const [apiFromA, ownDaemon, bDaemon, bApp, bPublishedViaHost, bPublishedViaGateway] = await probe(a.containerId, [
      ["host.docker.internal", apiPort],
      ["127.0.0.1", 8000],
      [bNet.IPAddress, 8000],
      [bNet.IPAddress, 3000],
      ["host.docker.internal", bPublished],
      [aNet.Gateway, bPublished],
    ]);
    expect(apiFromA).toBe("connected");
    expect(ownDaemon).toBe("connected");
    expect(bDaemon).not.toBe("connected");
    expect(bApp).not.toBe("connected");
    // The daemons' ports are published on the host's loopback only: not through the bridge's gateway either.
    expect(bPublishedViaHost).not.toBe("connected");
    expect(bPublishedViaGateway).not.toBe("connected");
    expect(Date.now() - started).toBeLessThan(10_000);

    // The API (a host process) still reaches both daemons, and B's app is alive behind B's own proxy path.
    for (const s of sandboxes) expect((await fetch(`${s.url}/svc/health`)).status).toBe(200);
    const fromApi = await call(sandboxed.api.url, "GET", "/v1/health");
    expect(fromApi.status).toBe(200);
  });

  it("puts every sandbox of an installation on one labelled bridge without inter-container traffic", async () => {
    const installation = sandboxed.api.services.installationId;
    const networks = await docker.listNetworks({ filters: { label: [`dev.svc.installation=${installation}`] } });
    expect(networks).toHaveLength(1);
    const [network] = networks;
    expect(network!.Driver).toBe("bridge");
    expect(network!.Options?.["com.docker.network.bridge.enable_icc"]).toBe("false");
    for (const s of sandboxes) {
      const attached = Object.keys((await docker.getContainer(s.containerId).inspect()).NetworkSettings.Networks);
      expect(attached).toEqual([network!.Name]);
    }
  });

  it("creates an installation's network once, even when drivers race for it", async () => {
    const image = (await docker.getContainer(sandboxes[0]!.containerId).inspect()).Config.Image;
    // The engine lists a network only once its create has committed, not in creation order: a tie-break by age
    // kept two networks in about one race of five. Five rounds of six creates from three drivers.
    for (let round = 0; round < 5; round++) {
      const installation = randomUUID();
      const label = `dev.svc.installation=${installation}`;
      const drivers = [0, 1, 2].map(() => createDockerDriver({ servicePort: 8000 }));
      try {
        const ids = await Promise.all(
          [0, 1, 2, 3, 4, 5].map((i) =>
            drivers[i % 3]!.create({
              name: `svc-race-${installation.slice(0, 8)}-${i}`,
              image,
              env: {},
              owner: {
                installationId: installation,
                sandboxId: randomUUID(),
                sessionId: randomUUID(),
                projectId: randomUUID(),
              },
              servicePort: 8000,
              limits: { memoryBytes: 64 * 1024 * 1024, nanoCpus: 100_000_000, pids: 64 },
            }),
          ),
        );
        const networks = await docker.listNetworks({ filters: { label: [label] } });
        expect(networks).toHaveLength(1);
        for (const id of ids) {
          const mode = (await docker.getContainer(id).inspect()).HostConfig.NetworkMode;
          expect([networks[0]!.Id, networks[0]!.Name]).toContain(mode);
        }
      } finally {
        for (const c of await docker.listContainers({ all: true, filters: { label: [label] } })) {
          await docker.getContainer(c.Id).remove({ force: true });
        }
        for (const n of await docker.listNetworks({ filters: { label: [label] } })) {
          await docker.getNetwork(n.Id).remove();
        }
      }
    }
  });

  it("answers git credential requests only for the project's own repository URL", async () => {
    const [a] = sandboxes;
    const env = Object.fromEntries(
      (await docker.getContainer(a!.containerId).inspect()).Config.Env.map((e) => [
        e.slice(0, e.indexOf("=")),
        e.slice(e.indexOf("=") + 1),
      ]),
    );
    const repoUrl = new URL(env.SVC_REPO_URL!);
    const other = new URL(repoUrl);
    other.pathname = `/git/${randomUUID()}.git`;
    const otherPort = new URL(repoUrl);
    otherPort.port = String(Number(repoUrl.port || 80) + 1);
    const foreign = [
      "https://evil.example/svc/repo.git",
      `https://${repoUrl.host}${repoUrl.pathname}`,
      other.toString(),
      otherPort.toString(),
      `${repoUrl.protocol}//${repoUrl.host}/`,
    ];
    // What git asks its helper for each URL, in the workspace (where the daemon configured the helper); one exec.
    const script = `for url in "$@"; do echo "=== $url"; printf 'url=%s\\n\\n' "$url" | git credential fill 2>&1; done`;
    const res = await execIn(docker, a!.containerId, ["sh", "-c", script, "fill", repoUrl.toString(), ...foreign], {
      env: ["GIT_TERMINAL_PROMPT=0"],
    });
    const answers = res.out.split(/^=== /m).slice(1);
    expect(answers, res.out).toHaveLength(foreign.length + 1);
    expect(answers[0]).toMatch(/^password=svc_git_/m);
    for (const [i, url] of foreign.entries()) {
      expect(answers[i + 1], url).not.toMatch(/password=|svc_git_/);
      expect(answers[i + 1], url).toContain("no credential for");
    }
  });
});
