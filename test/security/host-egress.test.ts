import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { type AddressInfo, connect, createServer, type Server as NetServer } from "node:net";
import { networkInterfaces } from "node:os";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { firewallChain } from "../../protocol/host-firewall.ts";
import { call } from "../support/api-server.ts";
import { execIn, removeProjectContainers } from "../support/docker.ts";
import { authedUrl, workRepo } from "../support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";
import { waitFor } from "../support/wait.ts";

const listen = async <T extends Server | NetServer>(server: T, host: string): Promise<number> => {
  await new Promise<void>((r) => server.listen(0, host, r));
  return (server.address() as AddressInfo).port;
};

/** The package mirror the machine's apt uses: somewhere outside this host that containers reach over plain HTTP. */
const MIRROR =
  /^URIs:\s*(\S+)/m.exec(readFileSync("/etc/apt/sources.list.d/debian.sources", "utf8"))?.[1] ??
  "http://deb.debian.org/debian";

/** This machine's address on its own network (not a Docker bridge): another address of the host a sandbox may try. */
const hostAddress = Object.entries(networkInterfaces())
  .filter(([name]) => !/^(lo|docker|br-|veth)/.test(name))
  .flatMap(([, list]) => list ?? [])
  .find((i) => i.family === "IPv4" && !i.internal)?.address;

/**
 * Real sandboxes on a real API: the host firewall the API installs (sandboxes reach its port, no other port of the
 * host) and a project's egress list (an internal network whose way out is the API's proxy), with two servers on the
 * host's loopback, one listed and one not.
 */
describe("sandboxes reach the API on the host and nothing else of it; [sandbox] egress limits the rest (real Docker)", () => {
  let sandboxed: SandboxedProject;
  let docker: Docker;
  let apiPort: number;
  let listed: { id: string; repo_url: string };
  const servers: (Server | NetServer)[] = [];
  let hostOnlyPort: number;
  let allowedPort: number;
  let refusedPort: number;
  let hits: string[];
  const open = { sessionId: "", containerId: "" };
  const fenced = { sessionId: "", containerId: "" };
  let closed = false;

  const auth = () => ({ token: sandboxed.user.token });

  async function startSession(projectId: string, into: typeof open): Promise<void> {
    const created = await call(sandboxed.api.url, "POST", `/v1/projects/${projectId}/sessions`, {
      ...auth(),
      body: {},
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    into.sessionId = created.body.session_id;
    await waitFor(
      `session ${into.sessionId} running`,
      async () => {
        const { body } = await call(
          sandboxed.api.url,
          "GET",
          `/v1/projects/${projectId}/sessions/${into.sessionId}`,
          auth(),
        );
        if (body.status === "failed") throw new Error(`session failed: ${body.error}`);
        return body.status === "running";
      },
      { timeoutMs: 120_000, everyMs: 250 },
    );
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${into.sessionId}`] } });
    into.containerId = container!.Id;
  }

  /** `host:port` reachable from inside the sandbox or not, probed at once (a dropped SYN waits out the timeout). */
  async function probe(containerId: string, targets: [string, number][]): Promise<Record<string, string>> {
    const script = targets
      .map(
        ([h, p]) =>
          `(timeout 3 bash -c '</dev/tcp/${h}/${p}' 2>/dev/null && echo "${h}:${p} open" || echo "${h}:${p} closed") &`,
      )
      .join("\n");
    const res = await execIn(docker, containerId, ["bash", "-c", `${script}\nwait`]);
    return Object.fromEntries(
      res.out
        .trim()
        .split("\n")
        .map((l) => l.split(" ") as [string, string]),
    );
  }

  const sh = (containerId: string, command: string) => execIn(docker, containerId, ["bash", "-c", command]);

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Open egress");
    docker = sandboxed.docker;
    apiPort = Number(new URL(sandboxed.api.url).port);

    const hostOnly = createServer((socket) => socket.end("host service\n"));
    hostOnlyPort = await listen(hostOnly, "0.0.0.0");
    hits = [];
    const answer = (name: string) =>
      createHttpServer((req, res) => {
        hits.push(`${name} ${req.url}`);
        res.end(`${name} answers\n`);
      });
    const allowed = answer("allowed");
    const refused = answer("refused");
    allowedPort = await listen(allowed, "127.0.0.1");
    refusedPort = await listen(refused, "127.0.0.1");
    servers.push(hostOnly, allowed, refused);

    // A project whose default branch lists one host: its first push creates main with the manifest on it.
    listed = (await call(sandboxed.api.url, "POST", "/v1/projects", { ...auth(), body: { name: "Listed egress" } }))
      .body;
    const repo = await workRepo(authedUrl(listed.repo_url, sandboxed.user.token));
    await repo.commit("egress list", {
      "svc.toml": `[sandbox]\negress = ["allowed.localhost:${allowedPort}"]\n`,
    });
    await repo.pushed("main");

    await Promise.all([startSession(sandboxed.project.id, open), startSession(listed.id, fenced)]);
  }, 300_000);

  afterAll(async () => {
    for (const server of servers) server.close();
    if (closed) return;
    await removeProjectContainers(docker, listed?.id);
    await sandboxed?.close();
  });

  it("a sandbox reaches the API's port on the host, no other port of any host address, on either network", async () => {
    expect(hostAddress).toBeDefined();
    for (const sandbox of [open, fenced]) {
      const reach = await probe(sandbox.containerId, [
        ["host.docker.internal", apiPort],
        ["host.docker.internal", hostOnlyPort],
        [hostAddress!, hostOnlyPort],
        [hostAddress!, apiPort],
      ]);
      expect(reach).toEqual({
        [`host.docker.internal:${apiPort}`]: "open",
        [`host.docker.internal:${hostOnlyPort}`]: "closed",
        [`${hostAddress}:${hostOnlyPort}`]: "closed",
        [`${hostAddress}:${apiPort}`]: "open",
      });
      const health = await sh(sandbox.containerId, `curl -sS -m 5 http://host.docker.internal:${apiPort}/v1/health`);
      expect(health.code, health.out).toBe(0);
      expect(JSON.parse(health.out)).toMatchObject({ status: "ok", host_firewall: { installed: true } });
    }
    // The host itself still reaches the service: only what comes from the sandboxes' bridges is dropped.
    const local = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: hostAddress!, port: hostOnlyPort });
      socket.on("data", (d) => resolve(String(d)));
      socket.on("error", reject);
    });
    expect(local).toBe("host service\n");
  });

  it("the listed project's sandbox goes out only through the proxy: the listed host answers, another is refused", async () => {
    const env = await sh(fenced.containerId, "echo $HTTP_PROXY; echo $NO_PROXY");
    const [proxy, noProxy] = env.out.trim().split("\n");
    expect(new URL(proxy!).host).toBe(`host.docker.internal:${apiPort}`);
    expect(noProxy).toBe("host.docker.internal,localhost,127.0.0.1");
    // `*.localhost` would match NO_PROXY's `localhost` (as the sandbox's own dev servers should): `--noproxy ''`
    // sends these names to the proxy, which resolves them on the host, as it does any name.
    const allowed = await sh(
      fenced.containerId,
      `curl -sS -m 10 --noproxy '' http://allowed.localhost:${allowedPort}/a`,
    );
    expect(allowed.out).toBe("allowed answers\n");
    const tunnelled = await sh(
      fenced.containerId,
      `curl -sS -m 10 --noproxy '' -p http://allowed.localhost:${allowedPort}/b`,
    );
    expect(tunnelled.out).toBe("allowed answers\n");
    const refused = await sh(
      fenced.containerId,
      `curl -sS -m 10 --noproxy '' -w '\\n%{http_code}' http://refused.localhost:${refusedPort}/c`,
    );
    expect(refused.out).toContain(`refused.localhost:${refusedPort} refused: not in [sandbox] egress of svc.toml`);
    expect(refused.out.trim().split("\n").at(-1)).toBe("403");
    const refusedTunnel = await sh(
      fenced.containerId,
      `curl -sS -m 10 --noproxy '' -p http://refused.localhost:${refusedPort}/d`,
    );
    expect(refusedTunnel.code).not.toBe(0);
    expect(refusedTunnel.out).toMatch(/CONNECT tunnel failed, response 403/);
    expect(hits).toEqual(["allowed /a", "allowed /b"]);

    // The outside world: through the proxy it is refused (not listed), and there is no way around it.
    const mirror = `${MIRROR}/dists/bookworm/Release`;
    const viaProxy = await sh(fenced.containerId, `curl -sS -m 10 -o /dev/null -w '%{http_code}' ${mirror}`);
    expect(viaProxy.out).toBe("403");
    const direct = await sh(fenced.containerId, `curl -sS -m 10 --noproxy '*' -o /dev/null ${mirror}`);
    expect(direct.code).not.toBe(0);
  });

  it("reports each refused host in the session's events and log", async () => {
    const path = `/v1/projects/${listed.id}/sessions/${fenced.sessionId}`;
    const events = await fetch(`${sandboxed.api.url}${path}/events`, {
      headers: { authorization: `Bearer ${sandboxed.user.token}` },
    });
    expect(events.status).toBe(200);
    const reader = events.body!.getReader();
    let text = "";
    const until = async (pattern: RegExp) => {
      const deadline = Date.now() + 20_000;
      while (!pattern.test(text)) {
        if (Date.now() > deadline) throw new Error(`no ${pattern} in the events: ${text}`);
        const { value, done } = await reader.read();
        if (done) throw new Error(`the events ended: ${text}`);
        text += Buffer.from(value).toString();
      }
    };
    try {
      await until(/"type":"ready"/);
      await sh(fenced.containerId, `curl -sS -m 10 --noproxy '' http://refused.localhost:${refusedPort}/e`);
      await until(/"type":"egress_refused"/);
    } finally {
      await reader.cancel();
    }
    const event = JSON.parse(/^data: (.*"egress_refused".*)$/m.exec(text)![1]!);
    expect(event).toEqual({
      type: "egress_refused",
      host: "refused.localhost",
      port: refusedPort,
      reason: "not in [sandbox] egress of svc.toml on the default branch",
    });

    const logs = await call(sandboxed.api.url, "GET", `${path}/logs`, auth());
    expect(logs.status).toBe(200);
    expect(String(logs.body)).toContain(
      `egress refused: refused.localhost:${refusedPort} (not in [sandbox] egress of svc.toml on the default branch)`,
    );
  });

  it("a project without a list keeps open egress: its sandbox reaches the outside directly, with no proxy set", async () => {
    const env = await sh(open.containerId, 'echo "[$HTTP_PROXY]"');
    expect(env.out.trim()).toBe("[]");
    const direct = await sh(
      open.containerId,
      `curl -sS -m 10 -o /dev/null -w '%{http_code}' ${MIRROR}/dists/bookworm/Release`,
    );
    expect(direct.out).toBe("200");
    const networks = await docker.listNetworks({
      filters: { label: [`dev.svc.installation=${sandboxed.api.services.installationId}`] },
    });
    expect(networks.map((n) => [n.Name.endsWith("-internal"), n.Internal]).sort()).toEqual([
      [false, false],
      [true, true],
    ]);
  });

  it("removes its chain when the API stops", async () => {
    const chain = firewallChain(sandboxed.api.services.installationId);
    const rules = () => execFileSync("iptables", ["-w", "-S"], { encoding: "utf8" });
    expect(rules()).toContain(`-A ${chain} -p tcp -m tcp --dport ${apiPort}`);
    const jumps = rules()
      .split("\n")
      .filter((r) => r.startsWith("-A INPUT") && r.endsWith(`-j ${chain}`));
    expect(jumps).toHaveLength(2);
    closed = true;
    await removeProjectContainers(docker, listed.id);
    await sandboxed.close();
    expect(rules()).not.toContain(chain);
  });
});
