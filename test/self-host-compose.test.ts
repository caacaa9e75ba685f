import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { type AddressInfo, createServer, type Server } from "node:net";
import { join } from "node:path";
import type Docker from "dockerode";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliEnv, cliHome, freePort, machineAddress, shipNewApp } from "./support/cli.ts";
import { execIn, ROOT, removeProjectContainers, requireDocker } from "./support/docker.ts";
import { GIT_ENV, runBuffered } from "./support/git-fixture.ts";
import { previewFetch } from "./support/preview-fetch.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";

const PREVIEW_APP = new URL("./fixtures/preview-app.mjs", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const APP_ENTRY = `
[[apps]]
name = "web"
command = "node -e \\"require('http').createServer((q, s) => s.end('app ok')).listen(process.env.PORT)\\""
port = 8080
`;

/** GET on 127.0.0.1:<port> with another Host header: an app's own origin as a browser would reach it. */
function hostGet(port: number, host: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}
/** The host's filter table as `iptables -S` prints it. */
const iptablesRules = () => execFileSync("iptables", ["-w", "-S"], { encoding: "utf8" });

/** A 6-field UTC cron expression matching exactly one second of the day. */
const onlyAt = (at: Date) => `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;

/**
 * The checkout as a user's: a copy (hard links, so it costs nothing) whose CLI, compose file and images are used, so
 * that the upgrade below can add a migration to "the next version" without touching the checkout other suites run.
 */
function copyCheckout(dir: string): string {
  const copy = join(dir, "checkout");
  mkdirSync(copy);
  for (const entry of [
    "bin",
    "dist",
    "images",
    "scripts",
    "compose",
    "package.json",
    "package-lock.json",
    ".dockerignore",
  ]) {
    execFileSync("cp", ["-al", join(ROOT, entry), join(copy, entry)]);
  }
  // A worktree's node_modules may be a link: the image needs the real directory.
  execFileSync("cp", ["-al", realpathSync(join(ROOT, "node_modules")), join(copy, "node_modules")]);
  return copy;
}

// Each test drives whole stacks (a second one for the restore, an image rebuild for the upgrade): under a full run's
// load a test took 60 s where alone it takes 26.
describe("compose mode: svc self-host start --mode compose (real docker-compose, images, PostgreSQL, sandboxes)", {
  timeout: 240_000,
}, () => {
  const home = cliHome();
  const app = join(home.dir, "app");
  let checkout: string;
  let docker: Docker;
  let port: number;
  let project: string;
  let projectId: string;
  // A model gateway on this machine (a loopback URL: sandboxes call it on their network's gateway) and another
  // service of this machine on every address, which sandboxes must not reach.
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let hostService: Server;
  let hostServicePort: number;
  const timings: Record<string, number> = {};
  /** The API image the upgrade built: removed after the run, as nobody else runs that version. */
  let upgradedApiImage: string | undefined;
  /** The checkout's CLI with a home's environment, as a user of that home runs it. */
  const svcOf =
    (env: CliEnv) =>
    (args: string[], cwd = app) =>
      runBuffered(process.execPath, [join(checkout, "bin", "svc.js"), ...args], { env, cwd, timeoutMs: 400_000 });
  const svc = svcOf(home.env);
  const status = async () => JSON.parse((await svc(["self-host", "status", "--json"], home.dir)).stdout);
  const containersOf = (session: string) =>
    docker.listContainers({ all: true, filters: { label: [`dev.svc.session=${session}`] } });
  const sandboxExec = async (session: string, cmd: string) => {
    const [container] = await containersOf(session);
    return execIn(docker, container!.Id, ["sh", "-c", cmd]);
  };

  beforeAll(async () => {
    docker = await requireDocker();
    checkout = copyCheckout(home.dir);
    port = await freePort();
    llm = await startScriptedLlm([]);
    // A probe that connects and leaves at once resets the connection under the greeting: not an error here.
    hostService = createServer((socket) => socket.on("error", () => {}).end("host service\n"));
    await new Promise<void>((r) => hostService.listen(0, "0.0.0.0", r));
    hostServicePort = (hostService.address() as AddressInfo).port;
    // No warm pool: it is tested on the engine and on Swarm (warm-pool, swarm-sessions); here each start, replica and
    // restore would warm a member nobody claims, seconds of a core each.
    const model = await svc(
      ["self-host", "env", "set", `SVC_LLM_BASE_URL=${llm.url}`, "SVC_AGENT_MODEL=scripted", "SVC_POOL_SIZE=0"],
      home.dir,
    );
    expect(model.code, model.stderr).toBe(0);
    const started = Date.now();
    const start = await svc(["self-host", "start", "--mode", "compose", "--port", String(port)], home.dir);
    timings.firstStart = Date.now() - started;
    expect(start.code, start.stderr).toBe(0);
    project = (await status()).compose_project;
    projectId = await shipNewApp(app, svc);
  }, 600_000);

  afterAll(async () => {
    console.log(`compose mode timings (ms): ${JSON.stringify(timings)}`);
    await svc(["self-host", "stop", "--sandboxes"], home.dir);
    llm?.close();
    hostService?.close();
    // The stack's firewall, had a failed stop left it (stop removes it).
    const chain = `SVC-${project}`;
    for (const rule of iptablesRules().split("\n")) {
      if (rule.startsWith("-A INPUT ") && rule.endsWith(` -j ${chain}`))
        await execa("iptables", ["-w", "-D", ...rule.split(" ").slice(1)], { reject: false });
    }
    for (const op of ["-F", "-X"]) await execa("iptables", ["-w", op, chain], { reject: false });
    await removeProjectContainers(docker, projectId);
    await removeComposeProject(project);
    if (upgradedApiImage)
      await docker
        .getImage(upgradedApiImage)
        .remove()
        .catch(() => {});
  }, 120_000);

  /** Every container, volume and network a compose project left. */
  async function removeComposeProject(name: string) {
    const label = `com.docker.compose.project=${name}`;
    for (const c of await docker.listContainers({ all: true, filters: { label: [label] } })) {
      await docker.getContainer(c.Id).remove({ force: true, v: true });
    }
    for (const v of ["pgdata", "data"])
      await docker
        .getVolume(`${name}_${v}`)
        .remove()
        .catch(() => {});
    for (const n of await docker.listNetworks({ filters: { label: [label] } })) {
      await docker
        .getNetwork(n.Id)
        .remove()
        .catch(() => {});
    }
  }

  it("runs PostgreSQL, the API and the edge from locally built images; the mode is remembered", async () => {
    const s = await status();
    expect(s).toMatchObject({
      status: "running",
      mode: "compose",
      database: "postgres",
      url: `http://127.0.0.1:${port}`,
    });
    expect(s.services.map((c: { service: string; health: string }) => `${c.service}:${c.health}`)).toEqual([
      "postgres:healthy",
      "api:healthy",
      "edge:healthy",
    ]);
    const state = JSON.parse(readFileSync(join(home.env.SVC_HOME!, "selfhost.json"), "utf8"));
    expect(state.mode).toBe("compose");
    expect(statSync(join(home.env.SVC_HOME!, "compose", "settings.json")).mode & 0o777).toBe(0o600);
    // Named volumes hold the database and the repositories; the API has the engine's socket.
    const volumes = (await docker.listVolumes()).Volumes.map((v) => v.Name);
    expect(volumes).toEqual(expect.arrayContaining([`${project}_pgdata`, `${project}_data`]));
    const [api] = await docker.listContainers({
      filters: { label: [`com.docker.compose.project=${project}`, "com.docker.compose.service=api"] },
    });
    expect(api!.Mounts.map((m) => m.Destination)).toEqual(
      expect.arrayContaining(["/var/run/docker.sock", "/var/lib/svc"]),
    );
    // Only the edge publishes a port, on loopback.
    const published = (
      await docker.listContainers({ filters: { label: [`com.docker.compose.project=${project}`] } })
    ).flatMap((c) =>
      c.Ports.filter((p) => p.PublicPort).map(
        (p) => `${c.Labels["com.docker.compose.service"]}:${p.IP}:${p.PublicPort}`,
      ),
    );
    expect(published).toEqual([`edge:127.0.0.1:${port}`]);

    const again = await svc(["self-host", "start"], home.dir);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("already running");
    const other = await svc(["self-host", "start", "--mode", "embedded"], home.dir);
    expect(other.code).toBe(1);
    expect(other.stderr).toBe(
      "error: svc self-host is already running in compose mode; run 'svc self-host restart --mode embedded'",
    );
  });

  it("provisions a session from the API container: its own network, no host port; it pushes, opens a CR and answers the preview", async () => {
    const created = await svc(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const [container] = await containersOf(id);
    const inspect = await docker.getContainer(container!.Id).inspect();
    expect(Object.keys(inspect.NetworkSettings.Networks)).toEqual([expect.stringMatching(/^svc-sandbox-/)]);
    expect(inspect.HostConfig.PortBindings ?? {}).toEqual({});

    const push = await sandboxExec(
      id,
      "echo work > work.txt && git add work.txt && git commit -qm work && git push -q origin HEAD",
    );
    expect(push.code, push.out).toBe(0);
    const opened = await sandboxExec(id, "svc cr open --title 'From a compose sandbox' --json");
    expect(opened.code, opened.out).toBe(0);

    const server = await docker.getContainer(container!.Id).exec({
      Cmd: ["/opt/svc/bin/node", "--input-type=module", "-e", readFileSync(PREVIEW_APP, "utf8")],
    });
    await server.start({ Detach: true });
    const preview = await svc(["sessions", "preview", id]);
    expect(preview.code, preview.stderr).toBe(0);
    let page = await previewFetch(preview.stdout.trim());
    for (let i = 0; i < 50 && page.status !== 200; i++) {
      await sleep(100);
      page = await previewFetch(preview.stdout.trim());
    }
    expect(await page.text()).toContain('<script type="module" src="/src/main.js">');

    // The sandbox sees the API by its alias, and not the database beside it.
    const reach = await sandboxExec(
      id,
      "curl -s -o /dev/null -w '%{http_code}' http://svc-api:7700/v1/health; echo; getent hosts postgres || echo no-postgres",
    );
    expect(reach.out).toContain("200");
    expect(reach.out).toContain("no-postgres");
    const pg = await docker.listContainers({
      filters: { label: [`com.docker.compose.project=${project}`, "com.docker.compose.service=postgres"] },
    });
    const pgAddress = Object.values(pg[0]!.NetworkSettings.Networks)[0]!.IPAddress;
    const db = await sandboxExec(id, `curl -s -m 2 telnet://${pgAddress}:5432 </dev/null; echo "exit=$?"`);
    expect(db.out).toMatch(/exit=(28|7)/);
  });

  it("closes this machine to sandboxes but the model gateway's port (iptables by the CLI); the API containers keep it", async () => {
    const [session] = JSON.parse((await svc(["sessions", "ls", "--json"])).stdout).filter(
      (s: { status: string }) => s.status === "running",
    );
    const host = machineAddress();
    const llmPort = Number(new URL(llm.url).port);
    const targets: [string, number][] = [
      ["host.docker.internal", hostServicePort],
      [host, hostServicePort],
      ["host.docker.internal", llmPort],
    ];
    // At once: a dropped SYN waits out the timeout.
    const probes = targets
      .map(
        ([h, p]) =>
          `(timeout 3 bash -c '</dev/tcp/${h}/${p}' 2>/dev/null && echo ${h}:${p}=open || echo ${h}:${p}=closed) &`,
      )
      .join("\n");
    const reach = await sandboxExec(session.session_id, `${probes}\nwait`);
    expect(
      Object.fromEntries(
        reach.out
          .trim()
          .split("\n")
          .map((l) => l.split("=")),
      ),
    ).toEqual({
      [`host.docker.internal:${hostServicePort}`]: "closed",
      [`${host}:${hostServicePort}`]: "closed",
      [`host.docker.internal:${llmPort}`]: "open",
    });
    // The API answers the sandbox on their network; it says nothing of a firewall it cannot see.
    const health = await sandboxExec(session.session_id, "curl -sS -m 5 http://svc-api:7700/v1/health");
    expect(health.code, health.out).toBe(0);
    expect(JSON.parse(health.out)).not.toHaveProperty("host_firewall");
    const [api] = await docker.listContainers({
      filters: { label: [`com.docker.compose.project=${project}`, "com.docker.compose.service=api"] },
    });
    const fromApi = await execIn(
      docker,
      api!.Id,
      ["bash", "-c", `timeout 3 bash -c '</dev/tcp/${host}/${hostServicePort}' && echo open`],
      { workingDir: "/" },
    );
    expect(fromApi.out.trim()).toBe("open");

    // One chain of this stack's, jumped to for the pool's sources; the second start above replaced it.
    const chain = `SVC-${project}`;
    expect(
      iptablesRules()
        .split("\n")
        .filter((r) => r.includes(chain)),
    ).toEqual([
      `-N ${chain}`,
      `-A INPUT -s 10.213.0.0/16 -j ${chain}`,
      `-A ${chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
      `-A ${chain} -p tcp -m tcp --dport ${llmPort} -m comment --comment "svc-holder:${project}" -j ACCEPT`,
      `-A ${chain} -j DROP`,
    ]);
    const doctor = JSON.parse((await svc(["self-host", "doctor", "--json"], home.dir)).stdout);
    expect(doctor.checks).toContainEqual({
      check: "host-firewall",
      ok: true,
      detail: "sandboxes reach only the API's and the model gateway's ports of this machine",
    });
  });

  it("logs api, postgres and edge; an unknown service exits 1", async () => {
    const api = await svc(["self-host", "logs", "api", "-n", "500"], home.dir);
    expect(api.code, api.stderr).toBe(0);
    expect(api.stdout).toMatch(/\d\d:\d\d:\d\d INFO\s+Server listening at http:\/\/\S+:7700/);
    const json = await svc(["self-host", "logs", "api", "--json", "-n", "5"], home.dir);
    for (const line of json.stdout.split("\n")) expect(JSON.parse(line)).toHaveProperty("msg");
    expect((await svc(["self-host", "logs", "postgres"], home.dir)).stdout).toContain("database system is ready");
    expect((await svc(["self-host", "logs", "edge"], home.dir)).stdout).toContain("edge listening");
    const bad = await svc(["self-host", "logs", "redis"], home.dir);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("services: postgres, api, edge");
  });

  it("stop keeps the volumes and running sandboxes; start brings back every CR and adopts the sandbox; stop --sandboxes stops sessions", async () => {
    const running = JSON.parse((await svc(["sessions", "ls", "--json"])).stdout).filter(
      (s: { status: string }) => s.status === "running",
    );
    expect(running).toHaveLength(1);
    const stop = await svc(["self-host", "stop"], home.dir);
    expect(stop.code, stop.stderr).toBe(0);
    expect((await status()).status).toBe("stopped");
    expect((await containersOf(running[0].session_id))[0]!.State).toBe("running");
    // The stack's firewall went with it: no chain, no jump.
    expect(iptablesRules()).not.toContain(`SVC-${project}`);

    const started = Date.now();
    const start = await svc(["self-host", "start"], home.dir);
    timings.warmStart = Date.now() - started;
    expect(start.code, start.stderr).toBe(0);
    expect(start.stderr).not.toContain("building");
    const crs = JSON.parse((await svc(["cr", "ls", "--json"])).stdout);
    expect(crs.map((c: { title: string }) => c.title)).toContain("From a compose sandbox");
    // The restarted API reaches the sandbox that kept running.
    const pushed = await sandboxExec(
      running[0].session_id,
      "echo more >> work.txt && git commit -qam more && git push -q origin HEAD",
    );
    expect(pushed.code, pushed.out).toBe(0);
    const diff = await svc(["cr", "show", String(crs[0].number), "--json"]);
    expect(diff.code, diff.stderr).toBe(0);
    const info = JSON.parse((await svc(["sessions", "info", running[0].session_id, "--json"])).stdout);
    expect(info.status).toBe("running");

    const full = await svc(["self-host", "stop", "--sandboxes", "--json"], home.dir);
    expect(full.code, full.stderr).toBe(0);
    expect(JSON.parse(full.stdout)).toMatchObject({ stopped: true, mode: "compose", sessions_stopped: 1 });
    expect(await containersOf(running[0].session_id)).toHaveLength(0);
    expect((await svc(["self-host", "start"], home.dir)).code).toBe(0);
    const after = JSON.parse((await svc(["sessions", "info", running[0].session_id, "--json"])).stdout);
    expect(after.status).toBe("stopped");
  });

  it("two API replicas behind the one port: one sandbox per session, sandboxes apart, one firing per trigger instant", async () => {
    expect((await svc(["self-host", "stop"], home.dir)).code).toBe(0);
    const start = await svc(["self-host", "start", "--api-replicas", "2"], home.dir);
    expect(start.code, start.stderr).toBe(0);
    const apis = (await status()).services.filter((c: { service: string }) => c.service === "api");
    expect(apis.map((c: { health: string }) => c.health)).toEqual(["healthy", "healthy"]);

    // A trigger at one second a little ahead, merged to main while both replicas run.
    const at = new Date(Math.ceil((Date.now() + 15_000) / 1000) * 1000);
    const manifest = readFileSync(join(app, "svc.toml"), "utf8");
    writeFileSync(
      join(app, "svc.toml"),
      `${manifest}\n[[triggers]]\nslug = "once"\nschedule = "${onlyAt(at)}"\nprompt = "tick"\n${APP_ENTRY}`,
    );
    await execa("bash", ["-c", "git commit -qam trigger"], { cwd: app, env: GIT_ENV });
    const shipped = await svc(["ship", "--merge"]);
    expect(shipped.code, shipped.stderr).toBe(0);

    // Sessions asked for at once, through the edge, land on both replicas: each gets exactly one sandbox.
    const created = await Promise.all([1, 2, 3].map(() => svc(["sessions", "new"])));
    const ids = created.map((c) => {
      expect(c.code, c.stderr).toBe(0);
      return c.stdout.trim();
    });
    for (const id of ids) expect(await containersOf(id)).toHaveLength(1);
    // Every replica reaches every sandbox: the edge takes replicas in turn, and each proxies the preview.
    for (const id of ids) {
      const [container] = await containersOf(id);
      const server = await docker.getContainer(container!.Id).exec({
        Cmd: ["/opt/svc/bin/node", "--input-type=module", "-e", readFileSync(PREVIEW_APP, "utf8")],
      });
      await server.start({ Detach: true });
      const url = (await svc(["sessions", "preview", id])).stdout.trim();
      const statuses: number[] = [];
      for (let i = 0; i < 40 && statuses.filter((c) => c === 200).length < 4; i++) {
        const res = await previewFetch(url);
        await res.arrayBuffer();
        if (res.status === 200 || statuses.includes(200)) statuses.push(res.status);
        else await sleep(100);
      }
      expect(statuses).toEqual([200, 200, 200, 200]);
    }
    // The [[apps]] entry shipped with the trigger deploys on its own network, which every replica joins: the app
    // answers through the edge whichever replica takes the request.
    for (let i = 0; i < 240; i++) {
      const apps = JSON.parse((await svc(["apps", "ls", "--json"])).stdout || "[]");
      if (apps[0]?.status === "live" || apps[0]?.status === "failed") break;
      await sleep(500);
    }
    expect(JSON.parse((await svc(["apps", "info", "web", "--json"])).stdout)).toMatchObject({ status: "live" });
    const link = new URL((await svc(["apps", "open", "web"])).stdout.trim());
    for (let i = 0; i < 4; i++) {
      expect(await hostGet(port, link.host, link.pathname + link.search)).toEqual({ status: 200, body: "app ok" });
    }

    const [a, b] = ids;
    const bAddress = Object.values((await containersOf(b!))[0]!.NetworkSettings.Networks)[0]!.IPAddress;
    const across = await sandboxExec(a!, `curl -s -m 2 http://${bAddress}:8000/svc/health; echo "exit=$?"`);
    expect(across.out).toMatch(/exit=(28|7)/);

    while (Date.now() < at.getTime() + 8000) await sleep(500);
    const fired = JSON.parse((await svc(["sessions", "ls", "--json"])).stdout).filter(
      (s: { trigger: string | null }) => s.trigger === "once",
    );
    expect(fired).toHaveLength(1);
    expect(await containersOf(fired[0].session_id)).toHaveLength(1);
    const logs = (await svc(["self-host", "logs", "api", "-n", "2000"], home.dir)).stdout;
    // `logs api` names each line's replica (compose v1 `api_1`, v2 `<project>-api-1`).
    expect(new Set([...logs.matchAll(/^(\S*api[_-]\d) \d\d:/gm)].map((m) => m[1])).size).toBe(2);
  });

  it("backs up the running stack with pg_dump and restores it into a fresh home: its CR merges there, a new installation", async () => {
    expect((await svc(["secrets", "set", "GREETING=from-compose"])).code).toBe(0);
    const file = join(home.dir, "compose-backup.tar.gz");
    const backup = await svc(["self-host", "backup", file], home.dir);
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stderr).toContain("1 secret");
    expect((await execa("tar", ["-tzf", file])).stdout).toContain("svc-backup/database/postgres.sql");

    // A second home on this machine: its own compose project, port and admin token; the app links to its stack.
    const other = cliHome();
    const inOther = svcOf(other.env);
    const restored = await inOther(["self-host", "restore", file], other.dir);
    expect(restored.code, restored.stderr).toBe(0);
    const otherPort = await freePort();
    let otherProject: string | undefined;
    let otherInstallation: string | undefined;
    try {
      const started = await inOther(["self-host", "start", "--port", String(otherPort)], other.dir);
      expect(started.code, started.stderr).toBe(0);
      const otherStatus = JSON.parse((await inOther(["self-host", "status", "--json"], other.dir)).stdout);
      otherProject = otherStatus.compose_project;
      expect(otherStatus.mode).toBe("compose");
      expect(otherProject).not.toBe(project);

      const admin = async (home: string, at: number) => {
        const { admin_token } = JSON.parse(readFileSync(join(home, "selfhost.json"), "utf8"));
        const res = await fetch(`http://127.0.0.1:${at}/v1/admin/installation`, {
          headers: { authorization: `Bearer ${admin_token}` },
        });
        return ((await res.json()) as { id: string }).id;
      };
      otherInstallation = await admin(other.env.SVC_HOME!, otherPort);
      expect(otherInstallation).not.toBe(await admin(home.env.SVC_HOME!, port));

      const original = JSON.parse((await svc(["cr", "ls", "--json"])).stdout) as { number: number; title: string }[];
      const copy = JSON.parse((await inOther(["cr", "ls", "--json"])).stdout) as typeof original;
      expect(copy.map((c) => [c.number, c.title])).toEqual(original.map((c) => [c.number, c.title]));
      expect((await inOther(["secrets", "ls"])).stdout).toContain("GREETING");
      // The repository came along: a CR merges in the copy, and only there.
      const open = original.find((c) => c.title === "From a compose sandbox")!;
      const merged = await inOther(["cr", "merge", String(open.number)]);
      expect(merged.code, merged.stderr).toBe(0);
      const statusIn = async (run: typeof svc) =>
        JSON.parse((await run(["cr", "show", String(open.number), "--json"])).stdout).change_request.status;
      expect(await statusIn(inOther)).toBe("merged");
      expect(await statusIn(svc)).toBe("open");
    } finally {
      await inOther(["self-host", "stop", "--sandboxes"], other.dir);
      if (otherProject) await removeComposeProject(otherProject);
      // The copy deploys the project's [[apps]] too, under the same project id: its containers go with it.
      const left = otherInstallation
        ? await docker.listContainers({ all: true, filters: { label: [`dev.svc.installation=${otherInstallation}`] } })
        : [];
      for (const c of left) await docker.getContainer(c.Id).remove({ force: true });
    }
  });

  it("upgrades to a version with a new migration: the image is rebuilt, the schema moves, the data stays", async () => {
    writeFileSync(
      join(checkout, "dist", "migrations", "0999_upgrade_probe.sql"),
      "create table upgrade_probe (id integer primary key);\n",
    );
    const restarted = Date.now();
    const restart = await svc(["self-host", "restart"], home.dir);
    timings.upgradeRestart = Date.now() - restarted;
    expect(restart.code, restart.stderr).toBe(0);
    expect(restart.stderr).toContain("building the api image");
    const [pg] = await docker.listContainers({
      filters: { label: [`com.docker.compose.project=${project}`, "com.docker.compose.service=postgres"] },
    });
    const versions = await execIn(
      docker,
      pg!.Id,
      ["psql", "-U", "svc", "-d", "svc", "-tAc", "select max(version) from schema_migrations"],
      { workingDir: "/" },
    );
    expect(versions.out.trim()).toBe("999");
    const crs = JSON.parse((await svc(["cr", "ls", "--json"])).stdout);
    expect(crs.map((c: { title: string }) => c.title)).toContain("From a compose sandbox");
    upgradedApiImage = (
      await docker.listContainers({
        filters: { label: [`com.docker.compose.project=${project}`, "com.docker.compose.service=api"] },
      })
    )[0]!.Image;
  });

  it("start --mode embedded stops the compose stack and its sandboxes; its projects hint there; switching back finds them", async () => {
    // The running sessions' sandboxes, not the warm pool's spare ones (which their API takes away when it stops).
    const running = new Set(
      (JSON.parse((await svc(["sessions", "ls", "--json"])).stdout) as { session_id: string; status: string }[])
        .filter((s) => s.status === "running")
        .map((s) => s.session_id),
    );
    const sandboxes = async () =>
      (await docker.listContainers({ filters: { label: [`dev.svc.project=${projectId}`] } })).filter((c) =>
        running.has(c.Labels["dev.svc.session"] ?? ""),
      );
    const live = await sandboxes();
    expect(live.length).toBeGreaterThan(0);
    // A plain stop keeps the sandboxes for the next start to adopt: a start in the other mode must not orphan them.
    expect((await svc(["self-host", "stop"], home.dir)).code).toBe(0);
    expect((await sandboxes()).length).toBe(live.length);
    // Two API replicas are compose's: the switch to embedded runs its one API without being told.
    const switched = await svc(["self-host", "start", "--mode", "embedded", "--port", String(port)], home.dir);
    expect(switched.code, switched.stderr).toBe(0);
    expect(switched.stderr).toContain("the compose mode's stack left");
    // Nothing of the compose stack runs: neither its services nor its sandboxes and apps. Its data stays.
    expect(await docker.listContainers({ filters: { label: [`com.docker.compose.project=${project}`] } })).toHaveLength(
      0,
    );
    expect(
      await docker.listContainers({ all: true, filters: { label: [`dev.svc.project=${projectId}`] } }),
    ).toHaveLength(0);
    expect((await docker.getVolume(`${project}_pgdata`).inspect()).Name).toBe(`${project}_pgdata`);
    expect((await status()).mode).toBe("embedded");
    const elsewhere = await svc(["cr", "ls"]);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain(
      "this project may live in the compose mode's data: svc self-host restart --mode compose",
    );

    const back = await svc(["self-host", "restart", "--mode", "compose"], home.dir);
    expect(back.code, back.stderr).toBe(0);
    const sessions = JSON.parse((await svc(["sessions", "ls", "--json"])).stdout) as {
      session_id: string;
      status: string;
    }[];
    for (const c of live) {
      expect(sessions.find((s) => s.session_id === c.Labels["dev.svc.session"])?.status).toBe("stopped");
    }
    expect((await svc(["cr", "ls", "--json"])).code).toBe(0);
  });
});
