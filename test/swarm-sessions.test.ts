import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { createSwarmDriver } from "../orchestrator/sandbox/swarm-driver.ts";
import { createSwarmRelay } from "../orchestrator/sandbox/swarm-relay.ts";
import { call, type seedUser, type TestApi } from "./support/api-server.ts";
import { cliHome, svc } from "./support/cli.ts";
import { bridgeGateway, execIn } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { previewFetch } from "./support/preview-fetch.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { useSwarm } from "./support/swarm.ts";
import { waitFor } from "./support/wait.ts";

const swarm = useSwarm();

/**
 * Whether the sandbox's daemon answers at `address` from this host (where the API runs): its health, which it
 * serves without a key. This network sends traffic for unknown addresses to an intercepting proxy, so a connection
 * that opens proves nothing by itself.
 */
async function daemonAnswersAt(address: string): Promise<boolean> {
  try {
    const res = await fetch(`http://${address}:8000/svc/health`, { signal: AbortSignal.timeout(2000) });
    const body = (await res.json()) as { busy?: unknown };
    return res.status === 200 && typeof body.busy === "boolean";
  } catch {
    return false;
  }
}

describe("sessions on Docker Swarm: each sandbox a service of one task, reached only over its daemon's dial-out link", () => {
  let docker: Docker;
  let sandboxed: SandboxedProject;
  let api: TestApi;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };
  let sessionId = "";
  let nextId = "";

  const sessions = (suffix = "", method = "GET", body?: unknown) => sandboxed.sessions(suffix, method, body);
  const status = async (id: string) => (await sessions(`/${id}`)).body.status as string;
  const serviceOf = async (id: string) => docker.listServices({ filters: { label: [`dev.svc.session=${id}`] } });

  beforeAll(async () => {
    docker = swarm.docker();
    llm = await startScriptedLlm([
      {
        when: "Add agent.txt",
        steps: [
          {
            tool: "bash",
            args: {
              command:
                "echo from-a-swarm-task > agent.txt && git add agent.txt && git commit -qm 'agent: add agent.txt' && git push -q origin HEAD && svc cr open --title 'From a Swarm task'",
              description: "commit, push, open a CR",
            },
          },
          { text: "Pushed and opened a change request." },
        ],
      },
      {
        when: "Serve the app",
        steps: [
          {
            tool: "bash",
            args: {
              command:
                "(setsid /opt/svc/bin/node -e \"require('http').createServer((q,s)=>s.end('hello from a swarm task')).listen(3000)\" >/dev/null 2>&1 &)",
              description: "serve port 3000",
            },
          },
          { text: "Serving on 3000." },
        ],
      },
    ]);
    sandboxed = await startSandboxedProject(
      "Swarmed",
      {
        sessionCap: 1,
        poolSize: 1,
        sandboxLink: "dial-out",
        llm: { baseUrl: llm.url, apiKey: "test-key", model: "scripted" },
      },
      {
        background: true,
        // Everything the API asks of a sandbox goes over its link: the engine's exec is never the way in.
        driver: {
          ...createSwarmDriver({ docker, servicePort: 8000, settings: {} }),
          exec: async () => {
            throw new Error("the engine's exec was used");
          },
        },
      },
    );
    ({ api, user, project } = sandboxed);
    swarm.cleanUp(`dev.svc.installation=${api.services.installationId}`);
  }, 300_000);

  afterAll(async () => {
    await sandboxed?.close();
    llm?.close();
  });

  it("runs a session as a Swarm service: the agent's prompt becomes a pushed commit and a CR", async () => {
    const created = await sessions("", "POST", { prompt: "Add agent.txt, push it and open a change request." });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    sessionId = created.body.session_id;
    await waitFor("the session running", async () => (await status(sessionId)) === "running", { timeoutMs: 180_000 });

    const [service] = await serviceOf(sessionId);
    expect(service?.Spec?.Labels?.["dev.svc.project"]).toBe(project.id);
    expect(service?.Spec?.TaskTemplate?.RestartPolicy?.Condition).toBe("none");
    // The daemon is reached through this API's end of its link, never at an address of the sandbox.
    const session = (await sessions(`/${sessionId}`)).body;
    expect(new URL(session.sandbox_url).hostname).toBe("127.0.0.1");

    const crs = `/v1/projects/${project.id}/change-requests`;
    const cr = await waitFor(
      "the agent's CR",
      async () =>
        (await call(api.url, "GET", crs, { token: user.token })).body.change_requests.find(
          (c: { title: string }) => c.title === "From a Swarm task",
        ),
      { timeoutMs: 120_000 },
    );
    expect(cr).toMatchObject({ head_ref: sessionId, origin_session_id: sessionId });
    const bare = api.services.repos.managedDir(project.id);
    expect((await git(["show", `${sessionId}:agent.txt`], { dir: bare })).stdout).toBe("from-a-swarm-task\n");
  }, 300_000);

  it("serves a preview and runs svc sessions exec over the link while this host has no route to the sandbox's daemon", async () => {
    const sent = await sessions(`/${sessionId}/messages`, "POST", { text: "Serve the app on port 3000." });
    expect(sent.status, JSON.stringify(sent.body)).toBeLessThan(300);
    const preview = `http://3000-${sessionId}.localhost:${new URL(api.url).port}/`;
    const bearer = { authorization: `Bearer ${user.token}` };
    const page = await waitFor(
      "the preview",
      async () => {
        const res = await previewFetch(preview, { headers: bearer }).catch(() => undefined);
        const body = res && (await res.text());
        return res?.status === 200 && body;
      },
      { timeoutMs: 60_000 },
    );
    expect(page).toBe("hello from a swarm task");
    const exec = await svc(["sessions", "exec", sessionId, "--", "sh", "-c", "cat agent.txt; echo $HOME; exit 3"], {
      env: {
        ...cliHome().env,
        SVC_API_URL: `${api.url}/v1`,
        SVC_CLI_TOKEN: user.token,
        SVC_PROJECT_ID: project.id,
      },
    });
    expect(exec.stderr).not.toContain("engine");
    expect(exec.code).toBe(3);
    expect(exec.stdout).toBe("from-a-swarm-task\n/root");

    // The task's one address is on its own internal overlay network, which has no route here (nor a leg on the
    // node's docker_gwbridge), and the daemon listens on the sandbox's loopback only.
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    const gwbridge = await docker.getNetwork("docker_gwbridge").inspect();
    expect(gwbridge.Containers?.[container!.Id]).toBeUndefined();
    const addresses = Object.values(container!.NetworkSettings.Networks).map((n) => n.IPAddress);
    expect(addresses).toHaveLength(1);
    expect(await daemonAnswersAt(addresses[0]!), addresses[0]).toBe(false);
  }, 120_000);

  it("a project with no egress list is fenced too: public hosts through the proxy only, no port of the node", async () => {
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    const [network] = Object.keys(container!.NetworkSettings.Networks);
    expect((await docker.getNetwork(network!).inspect()).Internal).toBe(true);
    const sh = async (command: string) => (await execIn(docker, container!.Id, ["bash", "-c", command])).out;
    const local = createHttpServer((_req, res) => res.end("a server of the node\n"));
    const port = await new Promise<number>((r) =>
      local.listen(0, "0.0.0.0", () => r((local.address() as AddressInfo).port)),
    );
    try {
      // The proxy takes any host of an open project, but one that resolves to this machine or a private network
      // only when a list names it.
      const refused = await sh(`curl -sS -m 10 --noproxy '' -w '\\n%{http_code}' http://node.localhost:${port}/`);
      expect(refused).toMatch(/refused: it resolves to 127\.0\.0\.1, .*only an entry naming the host may reach/);
      expect(refused.trim().split("\n").at(-1)).toBe("403");
      const gateway = await bridgeGateway(docker);
      const probes = [`host.docker.internal/${port}`, `${gateway}/${port}`, "1.1.1.1/80"];
      const reach = await sh(
        probes.map((t) => `(timeout 3 bash -c '</dev/tcp/${t}' 2>/dev/null && echo open || echo closed)`).join("; "),
      );
      expect(reach.trim().split("\n")).toEqual(["closed", "closed", "closed"]);
    } finally {
      local.close();
    }
    // Nothing is left unfenced, so the API says the host is closed to its sandboxes.
    expect((await call(api.url, "GET", "/v1/health")).body.host_firewall).toEqual({ installed: true });
  }, 60_000);

  it("a task killed under a session fails it within seconds and frees its slot for the next, which claims the warm pool's service", async () => {
    // The first session filled the project's pool: a service made and warmed before anyone asked for it.
    const pooled = await waitFor(
      "a ready pooled service",
      async () => {
        const [member] = await docker.listServices({
          filters: { label: [`dev.svc.project=${project.id}`, "dev.svc.pool"] },
        });
        const [container] = member
          ? await docker.listContainers({ filters: { label: [`com.docker.swarm.service.id=${member.ID}`] } })
          : [];
        // Its daemon's own word, asked inside the task (it listens on the task's loopback only).
        const health = container
          ? await execIn(docker, container.Id, [
              "/opt/svc/bin/node",
              "-e",
              "fetch('http://127.0.0.1:8000/svc/health').then((r) => r.json()).then((h) => console.log(h.pool))",
            ])
          : undefined;
        return health?.out.trim() === "ready" && member;
      },
      { timeoutMs: 180_000 },
    );
    // The cap is one session: the running one holds it (a pooled sandbox is no session).
    expect((await sessions("", "POST", {})).status).toBe(429);
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    const killedAt = Date.now();
    await docker.getContainer(container!.Id).kill();
    await waitFor("the session failed", async () => (await status(sessionId)) === "failed", { timeoutMs: 20_000 });
    const failedAfterMs = Date.now() - killedAt;
    // Faster than the reconciler's 30 s tick: the dropped link made the leader look.
    expect(failedAfterMs).toBeLessThan(15_000);
    await waitFor("its service removed", async () => (await serviceOf(sessionId)).length === 0, { timeoutMs: 20_000 });

    const asked = Date.now();
    const next = await sessions("", "POST", {});
    nextId = next.body.session_id;
    expect(next.status, JSON.stringify(next.body)).toBe(201);
    await waitFor("the next session running", async () => (await status(next.body.session_id)) === "running", {
      timeoutMs: 180_000,
    });
    const runningAfterMs = Date.now() - asked;
    // It runs on a pooled service made before it was asked, under the id that service was made for: no new service
    // was made for it. Which member, when two boots at once left two ready, is the pool's choice.
    const [service] = await serviceOf(next.body.session_id);
    expect(service?.Spec?.Labels?.["dev.svc.pool"], "a pooled service").toBeTruthy();
    expect(new Date(service!.CreatedAt!).getTime()).toBeLessThan(asked);
    expect(pooled.Spec?.Labels?.["dev.svc.pool"]).toBeTruthy();
    expect(runningAfterMs).toBeLessThan(10_000);
  }, 300_000);
  it("a project with a [sandbox] egress list runs behind an internal network: its link and the proxy's listed host only", async () => {
    // The cap is one: the previous test's session gives its slot up.
    expect((await sessions(`/${nextId}`, "DELETE")).status).toBe(204);
    const hits: string[] = [];
    const answer = (name: string) =>
      createHttpServer((req, res) => {
        hits.push(`${name} ${req.url}`);
        res.end(`${name} answers\n`);
      });
    const [allowed, refused] = [answer("allowed"), answer("refused")];
    const servers = [allowed, refused];
    const ports = await Promise.all(
      [allowed, refused].map(
        (server) =>
          new Promise<number>((r) => server.listen(0, "127.0.0.1", () => r((server.address() as AddressInfo).port))),
      ),
    );
    try {
      const fenced = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Fenced" } }))
        .body;
      const repo = await workRepo(authedUrl(fenced.repo_url, user.token));
      await repo.commit("egress list", { "svc.toml": `[sandbox]\negress = ["allowed.localhost:${ports[0]}"]\n` });
      await repo.pushed("main");
      const created = await call(api.url, "POST", `/v1/projects/${fenced.id}/sessions`, {
        token: user.token,
        body: {},
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const id = created.body.session_id;
      const state = async () =>
        (await call(api.url, "GET", `/v1/projects/${fenced.id}/sessions/${id}`, { token: user.token })).body;
      // Running means its daemon dialled the API: through the relay, the only way off its network.
      await waitFor("the fenced session running", async () => (await state()).status === "running", {
        timeoutMs: 180_000,
      });
      const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${id}`] } });
      const networks = Object.keys(container!.NetworkSettings.Networks);
      expect(networks).toHaveLength(1);
      expect((await docker.getNetwork(networks[0]!).inspect()).Internal).toBe(true);
      const sh = async (command: string) => (await execIn(docker, container!.Id, ["bash", "-c", command])).out;

      expect(await sh(`curl -sS -m 10 --noproxy '' http://allowed.localhost:${ports[0]}/a`)).toBe("allowed answers\n");
      expect(await sh(`curl -sS -m 10 --noproxy '' -p http://allowed.localhost:${ports[0]}/b`)).toBe(
        "allowed answers\n",
      );
      const denied = await sh(
        `curl -sS -m 10 --noproxy '' -w '\\n%{http_code}' http://refused.localhost:${ports[1]}/c`,
      );
      expect(denied).toContain("not in [sandbox] egress of svc.toml");
      expect(denied.trim().split("\n").at(-1)).toBe("403");
      expect(hits).toEqual(["allowed /a", "allowed /b"]);
      // Around the proxy there is nothing: no other port of the host, no host address, no outside address.
      const gateway = await bridgeGateway(docker);
      const probes = [`host.docker.internal/${ports[1]}`, `${gateway}/${new URL(api.url).port}`, "1.1.1.1/80"];
      const reach = await sh(
        probes.map((t) => `(timeout 3 bash -c '</dev/tcp/${t}' 2>/dev/null && echo open || echo closed)`).join("; "),
      );
      expect(reach.trim().split("\n")).toEqual(["closed", "closed", "closed"]);

      // A relay widened to one more host port is a new container with new addresses: the sandbox finds it by name,
      // its daemon's link comes back through it, and the session stays running.
      const extra = createHttpServer((_req, res) => res.end("extra port\n"));
      servers.push(extra);
      const extraPort = await new Promise<number>((r) =>
        extra.listen(0, "0.0.0.0", () => r((extra.address() as AddressInfo).port)),
      );
      await createSwarmRelay({ docker }).join(
        api.services.installationId,
        networks[0]!,
        [extraPort],
        container!.ImageID,
      );
      expect(await sh(`curl -sS -m 10 --noproxy '*' http://host.docker.internal:${extraPort}/`)).toBe("extra port\n");
      await new Promise((r) => setTimeout(r, 4000));
      expect((await state()).status).toBe("running");
      const apiPort = new URL(api.url).port;
      expect(
        await sh(
          `curl -sS -m 10 --noproxy '*' -o /dev/null -w '%{http_code}' http://host.docker.internal:${apiPort}/v1/health`,
        ),
      ).toBe("200");

      // Its network goes with it: the relay lets go of it first.
      const gone = await call(api.url, "DELETE", `/v1/projects/${fenced.id}/sessions/${id}`, { token: user.token });
      expect(gone.status).toBe(204);
      await waitFor(
        "its network removed",
        async () => (await docker.listNetworks({ filters: { name: [networks[0]!] } })).length === 0,
        { timeoutMs: 30_000 },
      );
    } finally {
      for (const server of servers) server.close();
    }
  }, 300_000);
});
