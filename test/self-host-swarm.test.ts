import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHome, freePort, svc as runSvc, shipNewApp } from "./support/cli.ts";
import { GIT_ENV } from "./support/git-fixture.ts";
import { useSwarm } from "./support/swarm.ts";
import { waitFor } from "./support/wait.ts";

const STACK_LABEL = "com.docker.stack.namespace";

describe("swarm mode: svc self-host start --mode swarm (a one-node Swarm, real images, PostgreSQL in the stack)", () => {
  const swarm = useSwarm();
  const home = cliHome();
  const app = join(home.dir, "app");
  const svc = (args: string[], cwd = app) => runSvc(args, { env: home.env, cwd });
  const status = async () => JSON.parse((await svc(["self-host", "status", "--json"], home.dir)).stdout);
  const timings: Record<string, number> = {};
  let port: number;
  let stack: string;
  const stackServices = () => swarm.docker().listServices({ filters: { label: [`${STACK_LABEL}=${stack}`] } });
  const stackNetworks = () => swarm.docker().listNetworks({ filters: { label: [`${STACK_LABEL}=${stack}`] } });
  const volumes = () => [`${stack}_swarm_pgdata`, `${stack}_swarm_data`];
  const crTitles = async () =>
    (JSON.parse((await svc(["cr", "ls", "--json"])).stdout) as { title: string }[]).map((c) => c.title);

  beforeAll(async () => {
    port = await freePort();
    // No warm pool: it is tested on the engine and on Swarm (warm-pool, swarm-sessions); here each start, replica and
    // restore would warm a member nobody claims, seconds of a core each.
    expect((await svc(["self-host", "env", "set", "SVC_POOL_SIZE=0"], home.dir)).code).toBe(0);
    const started = Date.now();
    // Two API replicas: a sandbox's link must reach the one that waits for it, and both must reach the sandbox.
    const start = await svc(
      ["self-host", "start", "--mode", "swarm", "--port", String(port), "--api-replicas", "2"],
      home.dir,
    );
    timings.firstStart = Date.now() - started;
    expect(start.code, start.stderr).toBe(0);
    stack = (await status()).swarm_stack;
    // Whatever a failed test leaves of the stack (its volumes too) goes after the file.
    swarm.cleanUp(`${STACK_LABEL}=${stack}`);
  }, 300_000);

  afterAll(async () => {
    console.log(`swarm mode timings (ms): ${JSON.stringify(timings)}`);
    await svc(["self-host", "stop"], home.dir);
    // Gone once the last test uninstalled: its installations' services went with it.
    const state = join(home.env.SVC_HOME!, "selfhost.json");
    const installations = existsSync(state) ? (JSON.parse(readFileSync(state, "utf8")).installations ?? []) : [];
    for (const id of installations) swarm.cleanUp(`dev.svc.installation=${id.id}`);
    // The stack's volumes, once the tasks' containers that Swarm removes after `stop` have let go of them.
    const deadline = Date.now() + 30_000;
    for (const name of stack ? volumes() : []) {
      while (!(await removeVolume(name)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    }
  }, 120_000);
  const removeVolume = (name: string) =>
    swarm
      .docker()
      .getVolume(name)
      .remove()
      .then(
        () => true,
        (err: { statusCode?: number }) => err.statusCode === 404,
      );

  it("deploys postgres, api and edge as services: the API on a manager with the swarm driver, only the edge published", async () => {
    const s = await status();
    expect(s).toMatchObject({ status: "running", mode: "swarm", database: "postgres", listen: "0.0.0.0" });
    expect(s.swarm_services.map((c: { service: string; replicas: string }) => `${c.service}:${c.replicas}`)).toEqual([
      "postgres:1/1",
      "api:2/2",
      "edge:1/1",
    ]);
    const health = await fetch(`http://127.0.0.1:${port}/v1/health`);
    expect(((await health.json()) as { database: string }).database).toBe("postgres");

    const specs = Object.fromEntries((await stackServices()).map((x) => [x.Spec!.Name!.slice(stack.length + 1), x]));
    const node = (await swarm.docker().info()).Swarm.NodeID as string;
    const api = specs.api!.Spec!.TaskTemplate as {
      ContainerSpec: { Env: string[]; Mounts: { Target: string }[] };
      Placement: { Constraints: string[] };
    };
    expect(api.ContainerSpec.Env).toEqual(
      expect.arrayContaining([
        "SVC_SANDBOX_DRIVER=swarm",
        "SVC_SANDBOX_LINK=dial-out",
        "SVC_TRUSTED_PROXY=tasks.edge",
        "SVC_LINK_BRIDGE_HOST=auto",
      ]),
    );
    expect(api.ContainerSpec.Mounts.map((m) => m.Target)).toEqual(
      expect.arrayContaining(["/var/lib/svc", "/var/run/docker.sock"]),
    );
    // One local data volume: the API stays on this node (and on a manager, which alone creates services).
    expect(api.Placement.Constraints).toEqual(expect.arrayContaining(["node.role == manager", `node.id == ${node}`]));
    const published = Object.entries(specs).flatMap(([name, x]) =>
      (x.Endpoint?.Ports ?? []).map((p) => `${name}:${p.PublishMode}:${p.PublishedPort}`),
    );
    expect(published).toEqual([`edge:host:${port}`]);
    const network = (await stackNetworks()).map((n) => n.Driver);
    expect(network).toEqual(["overlay"]);

    const generated = join(home.env.SVC_HOME!, "swarm", "stack.override.yaml");
    expect(statSync(generated).mode & 0o777).toBe(0o600);
    expect(readFileSync(generated, "utf8")).toContain(`one data volume, the local ${stack}_swarm_data, so the API`);
    const again = await svc(["self-host", "start"], home.dir);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("already running");
  });

  it("a project is shipped through the edge, and a push of new commits opens a CR there", async () => {
    await shipNewApp(app, (args) => svc(args));
    await execa("bash", ["-c", "echo more >> README.md && git commit -qam 'through the swarm'"], {
      cwd: app,
      env: GIT_ENV,
    });
    const ship = await svc(["ship"]);
    expect(ship.code, ship.stderr).toBe(0);
    expect(ship.stderr).toMatch(/opened CR #1: through the swarm \(ship\/\S+ -> main\)/);
    expect(await crTitles()).toEqual(["through the swarm"]);
  });

  it("backs up the running stack (pg_dump in its postgres task) and restores it into a fresh home as a swarm stack of its own: its CR merges there", async () => {
    const file = join(home.dir, "swarm-backup.tar.gz");
    const backup = await svc(["self-host", "backup", file], home.dir);
    expect(backup.code, backup.stderr).toBe(0);
    expect((await execa("tar", ["-tzf", file])).stdout).toContain("svc-backup/database/postgres.sql");

    // A second home on this machine: a stack of its own (name, volumes, port, admin token); the app links to it.
    const other = cliHome();
    const inOther = (args: string[], cwd = app) => runSvc(args, { env: other.env, cwd });
    const restored = await inOther(["self-host", "restore", file], other.dir);
    expect(restored.code, restored.stderr).toBe(0);
    let otherStack: string | undefined;
    try {
      const started = await inOther(["self-host", "start", "--port", String(await freePort())], other.dir);
      expect(started.code, started.stderr).toBe(0);
      const otherStatus = JSON.parse((await inOther(["self-host", "status", "--json"], other.dir)).stdout);
      otherStack = otherStatus.swarm_stack as string;
      swarm.cleanUp(`${STACK_LABEL}=${otherStack}`);
      expect(otherStatus).toMatchObject({ mode: "swarm", status: "running" });
      expect(otherStack).not.toBe(stack);

      const original = JSON.parse((await svc(["cr", "ls", "--json"])).stdout) as { number: number; title: string }[];
      const copy = JSON.parse((await inOther(["cr", "ls", "--json"])).stdout) as typeof original;
      expect(copy.map((c) => [c.number, c.title])).toEqual(original.map((c) => [c.number, c.title]));
      // The repository came along: the CR merges in the copy, and only there.
      const merged = await inOther(["cr", "merge", String(original[0]!.number)]);
      expect(merged.code, merged.stderr).toBe(0);
      const statusIn = async (run: typeof svc) =>
        JSON.parse((await run(["cr", "show", String(original[0]!.number), "--json"])).stdout).change_request.status;
      expect(await statusIn(inOther)).toBe("merged");
      expect(await statusIn(svc)).toBe("open");
    } finally {
      await inOther(["self-host", "stop"], other.dir);
      await inOther(["uninstall", "--yes", "--keep-images"], other.dir);
    }
    if (otherStack) {
      for (const v of [`${otherStack}_swarm_pgdata`, `${otherStack}_swarm_data`])
        await expect(swarm.docker().getVolume(v).inspect()).rejects.toMatchObject({ statusCode: 404 });
    }
  }, 300_000);

  it("logs api, postgres and edge through docker service logs; doctor says the engine is a manager", async () => {
    const api = await svc(["self-host", "logs", "api", "-n", "200"], home.dir);
    expect(api.code, api.stderr).toBe(0);
    // Two replicas: each line names its own first.
    expect(api.stdout).toMatch(/^api\.[12] \d\d:\d\d:\d\d INFO\s+Server listening at http:\/\/\S+:7700$/m);
    const json = await svc(["self-host", "logs", "api", "--json", "-n", "3"], home.dir);
    for (const line of json.stdout.split("\n")) expect(JSON.parse(line)).toHaveProperty("msg");
    expect((await svc(["self-host", "logs", "postgres"], home.dir)).stdout).toContain("database system is ready");
    expect((await svc(["self-host", "logs", "edge"], home.dir)).stdout).toContain("edge listening");
    const bad = await svc(["self-host", "logs", "redis"], home.dir);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("services: postgres, api, edge");

    const doctor = JSON.parse((await svc(["self-host", "doctor", "--json"], home.dir)).stdout);
    expect(doctor.checks).toContainEqual({
      check: "swarm",
      ok: true,
      detail: "the Docker engine is a Swarm manager (swarm mode)",
    });
  });

  it("a session runs as a Swarm service over the dial-out link: linked to the replica that made it, exec from either; stop leaves nothing", async () => {
    const created = await svc(["sessions", "new", "--no-wait"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const info = async () => JSON.parse((await svc(["sessions", "info", id, "--json"])).stdout);
    const running = await waitFor(
      "the session to run",
      async () => {
        const s = await info();
        if (s.status === "failed") throw new Error(`the session failed: ${s.error}`);
        return s.status === "running" && s;
      },
      { timeoutMs: 180_000, everyMs: 1000 },
    );
    const [sandbox] = await sandboxServices(id);
    expect(sandbox, "the session's sandbox service").toBeDefined();

    // The replica that made it named itself in the daemon's link URL, and the link reached that replica: the URL
    // the session runs at is that replica's bridge, on its address among the API tasks' on the stack network.
    const env = (sandbox!.Spec!.TaskTemplate as { ContainerSpec: { Env: string[] } }).ContainerSpec.Env;
    const linkUrl = new URL(env.find((e) => e.startsWith("SVC_LINK_URL="))!.slice("SVC_LINK_URL=".length));
    const hint = linkUrl.searchParams.get("replica");
    expect((await apiTaskAddresses()).sort()).toContain(hint);
    expect(new URL(running.sandbox_url).hostname).toBe(hint);

    // Through the edge, which spreads requests over both replicas in turn: of three execs, one request apart
    // between the last two, two reach different replicas whatever number of requests one exec makes.
    const outputs: string[] = [];
    for (const extra of [false, false, true]) {
      if (extra) expect((await fetch(`http://127.0.0.1:${port}/v1/health`)).status).toBe(200);
      const exec = await svc(["sessions", "exec", id, "--", "sh", "-c", "echo from $SVC_SESSION_ID"]);
      expect(exec.code, exec.stderr).toBe(0);
      outputs.push(exec.stdout.trim());
    }
    expect(outputs).toEqual([`from ${id}`, `from ${id}`, `from ${id}`]);

    const stopped = await svc(["sessions", "stop", id]);
    expect(stopped.code, stopped.stderr).toBe(0);
    await waitFor(
      "the sandbox's service and network to go",
      async () => {
        const networks = await swarm.docker().listNetworks({ filters: { label: [`dev.svc.session=${id}`] } });
        return (await sandboxServices(id)).length === 0 && networks.length === 0;
      },
      { timeoutMs: 60_000, everyMs: 500 },
    );
    expect((await info()).status).toBe("stopped");
  }, 300_000);
  const sandboxServices = (session: string) =>
    swarm.docker().listServices({ filters: { label: [`dev.svc.session=${session}`] } });
  /** The API replicas' addresses on the stack's network: where the edge's `tasks.api` resolves. */
  const apiTaskAddresses = async () => {
    const tasks = await swarm.docker().listTasks({
      filters: { service: [`${stack}_api`], "desired-state": ["running"] },
    });
    return tasks.flatMap((t) =>
      ((t as { NetworksAttachments?: { Addresses?: string[] }[] }).NetworksAttachments ?? []).flatMap((n) =>
        (n.Addresses ?? []).map((a) => a.split("/")[0]!),
      ),
    );
  };

  it("stop leaves no service and no network of the stack, the API's own services neither; volumes stay, and so does the data", async () => {
    // A sandbox service as the Swarm driver makes one: the installation's labels, an overlay network of its own.
    const installation = readInstallation(home.env.SVC_HOME!);
    const labels = { "dev.svc.installation": installation, "dev.svc.session": "swarm-test-session" };
    const net = await swarm.docker().createNetwork({ Name: `svc-swarm-${stack}-t`, Driver: "overlay", Labels: labels });
    await swarm.docker().createService({
      Name: `${stack}-sandbox-t`,
      Labels: labels,
      TaskTemplate: {
        ContainerSpec: { Image: "svc-debian:bookworm", Command: ["sleep", "300"], Labels: labels },
        RestartPolicy: { Condition: "none" },
        Networks: [{ Target: net.id }],
      },
    });

    const stopped = Date.now();
    const stop = await svc(["self-host", "stop", "--json"], home.dir);
    timings.stop = Date.now() - stopped;
    expect(stop.code, stop.stderr).toBe(0);
    expect(JSON.parse(stop.stdout)).toMatchObject({ stopped: true, mode: "swarm" });
    expect(JSON.parse(stop.stdout).services_removed).toContain(`${stack}-sandbox-t`);
    expect(await stackServices()).toEqual([]);
    expect(await stackNetworks()).toEqual([]);
    const own = { filters: { label: [`dev.svc.installation=${installation}`] } };
    expect(await swarm.docker().listServices(own)).toEqual([]);
    expect((await swarm.docker().listNetworks(own)).filter((n) => n.Driver === "overlay")).toEqual([]);
    for (const v of volumes()) expect((await swarm.docker().getVolume(v).inspect()).Name).toBe(v);
    expect((await status()).status).toBe("stopped");

    const started = Date.now();
    const start = await svc(["self-host", "start"], home.dir);
    timings.warmStart = Date.now() - started;
    expect(start.code, start.stderr).toBe(0);
    // PostgreSQL's image is reused (the API's is rebuilt when dist/ changed meanwhile: other suites build it too).
    expect(start.stderr).not.toContain("building the postgres image");
    expect(await crTitles()).toEqual(["through the swarm"]);
  });

  it("start --mode embedded leaves the swarm stack's data apart and hints at it; switching back finds the CR", async () => {
    const switched = await svc(["self-host", "restart", "--mode", "embedded"], home.dir);
    expect(switched.code, switched.stderr).toBe(0);
    expect(await stackServices()).toEqual([]);
    const elsewhere = await svc(["cr", "ls"]);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain(
      "this project may live in the swarm mode's data: svc self-host restart --mode swarm",
    );
    const back = await svc(["self-host", "restart", "--mode", "swarm"], home.dir);
    expect(back.code, back.stderr).toBe(0);
    expect((await status()).mode).toBe("swarm");
    expect(await crTitles()).toEqual(["through the swarm"]);
  });

  it("a start whose API task keeps failing exits 1 with the task's error (docker service ps) and its last lines", async () => {
    expect((await svc(["self-host", "stop"], home.dir)).code).toBe(0);
    // A value `env set` would refuse (as one an older CLI let through): the API exits at start, again and again.
    const file = join(home.env.SVC_HOME!, "selfhost.json");
    const state = JSON.parse(readFileSync(file, "utf8"));
    writeFileSync(file, JSON.stringify({ ...state, env: { ...state.env, SVC_SESSION_CAP: "lots" } }), { mode: 0o600 });
    try {
      const start = await svc(["self-host", "start"], home.dir);
      expect(start.code).toBe(1);
      expect(start.stderr).toContain(
        `error: the api service failed to start (task: non-zero exit (1)); docker service ps --no-trunc ${stack}_api:`,
      );
      expect(start.stderr).toMatch(/\\_ \S+_api\.1 .*Failed .*"task: non-zero exit \(1\)"/);
      expect(start.stderr).toContain("invalid configuration: SVC_SESSION_CAP");
    } finally {
      writeFileSync(file, JSON.stringify(state), { mode: 0o600 });
    }
  });

  it("svc uninstall removes the swarm stack's data volumes with the home, and nothing of the stack is left", async () => {
    expect((await svc(["self-host", "stop"], home.dir)).code).toBe(0);
    const removed = await svc(["uninstall", "--yes", "--keep-images", "--json"], home.dir);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout).docker.volumes).toEqual(expect.arrayContaining(volumes()));
    for (const v of volumes())
      await expect(swarm.docker().getVolume(v).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(await stackServices()).toEqual([]);
    expect(await stackNetworks()).toEqual([]);
  });
});

/** The installation the swarm stack's API said it is (recorded by start). */
function readInstallation(svcHome: string): string {
  const state = JSON.parse(readFileSync(join(svcHome, "selfhost.json"), "utf8"));
  return state.installations.find((i: { mode: string }) => i.mode === "swarm").id;
}

describe("swarm mode on an engine that is not a Swarm manager (a fake engine answering 'docker info')", () => {
  let engine: Server;
  const requests: string[] = [];
  const socket = join(cliHome().dir, "docker.sock");

  beforeAll(async () => {
    engine = createServer((req, res) => {
      requests.push(`${req.method} ${req.url?.split("?")[0]}`);
      const json = (status: number, body: unknown) => res.writeHead(status).end(JSON.stringify(body));
      if (req.url?.startsWith("/containers/json")) return json(200, []);
      if (req.url?.startsWith("/services")) return json(503, { message: "This node is not a swarm manager." });
      if (req.url === "/info") return json(200, { Swarm: { NodeID: "", LocalNodeState: "inactive" } });
      json(404, { message: "not faked" });
    });
    await new Promise<void>((r) => engine.listen(socket, r));
  });
  afterAll(() => engine?.close());

  it("start --mode swarm exits 1 saying to run 'docker swarm init', and initialises nothing", async () => {
    const home = cliHome();
    const env = { ...home.env, DOCKER_HOST: `unix://${socket}` };
    const start = await runSvc(
      ["self-host", "start", "--mode", "swarm", "--no-wizard", "--port", String(await freePort())],
      { env, cwd: home.dir },
    );
    expect(start.code).toBe(1);
    expect(start.stderr.split("\n").at(-1)).toBe(
      "error: swarm mode needs the Docker engine to be a Swarm manager, and it is in no swarm: run 'docker swarm init' (or join it to a swarm as a manager), then start again",
    );
    expect(requests).toContain("GET /info");
    expect(requests.filter((r) => r.startsWith("POST"))).toEqual([]);
  });
});
