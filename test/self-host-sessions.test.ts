import { readFileSync } from "node:fs";
import { join } from "node:path";
import type Docker from "dockerode";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireChromium } from "./support/browser.ts";
import { cliHome, freePort, machineAddress, shipNewApp, svc } from "./support/cli.ts";
import { execIn, removeInstallationNetworks, removeProjectContainers, requireDocker } from "./support/docker.ts";
import { previewFetch } from "./support/preview-fetch.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";

const PREVIEW_APP = new URL("./fixtures/preview-app.mjs", import.meta.url).pathname;

describe("a new user's path: self-host start, init, ship, sessions (real CLI, real Docker)", () => {
  const home = cliHome();
  const app = join(home.dir, "app");
  let docker: Docker;
  let browser: Browser;
  let port: number;
  let installation: string | undefined;
  const run = (args: string[]) => svc(args, { env: home.env, cwd: app });
  const containersOf = (session: string) =>
    docker.listContainers({ all: true, filters: { label: [`dev.svc.session=${session}`] } });

  beforeAll(async () => {
    docker = await requireDocker();
    browser = await requireChromium();
    port = await freePort();
    const start = await svc(["self-host", "start", "--port", String(port)], { env: home.env });
    expect(start.code, start.stderr).toBe(0);
    await shipNewApp(app, run);
  }, 300_000);
  afterAll(async () => {
    const project = JSON.parse(readFileSync(join(app, ".svc", "link.json"), "utf8")).project_id;
    await browser?.close();
    await svc(["self-host", "stop"], { env: home.env });
    await removeProjectContainers(docker, project);
    if (installation) await removeInstallationNetworks(docker, installation);
  });

  it("starts a session that reaches running; info --json has its status", async () => {
    const created = await run(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const info = JSON.parse((await run(["sessions", "info", id, "--json"])).stdout);
    expect(info).toMatchObject({ session_id: id, status: "running", branch: id, base_ref: "main" });
    const [container] = await containersOf(id);
    expect(container).toBeDefined();
    installation = container!.Labels["dev.svc.installation"];

    // A dev-server-like app the agent started on port 3000, opened the way `svc sessions preview` says.
    const server = await docker.getContainer(container!.Id).exec({
      Cmd: ["/opt/svc/bin/node", "--input-type=module", "-e", readFileSync(PREVIEW_APP, "utf8")],
    });
    await server.start({ Detach: true });
    const preview = await run(["sessions", "preview", id]);
    expect(preview.code, preview.stderr).toBe(0);
    const browserUrl = preview.stdout.trim();
    expect(browserUrl).toMatch(new RegExp(`^http://3000-${id}\\.localhost:\\d+/\\?svc_preview=`));
    let page = await previewFetch(browserUrl);
    for (let i = 0; i < 50 && page.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      page = await previewFetch(browserUrl);
    }
    expect(await page.text()).toContain('<script type="module" src="/src/main.js">');

    // In a real browser, the URL runs the app: its root-relative module loads and its WebSocket answers.
    const tab = await (await browser.newContext()).newPage();
    await tab.goto(browserUrl!);
    await tab.waitForFunction(() => document.querySelector("#out")?.textContent !== "loading", null, {
      timeout: 15_000,
    });
    expect(await tab.textContent("#out")).toBe("module+pong:ping");
    // The grant moved into an HttpOnly cookie: scripts cannot read it, and the bare origin keeps working.
    expect(await tab.evaluate(() => document.cookie)).not.toContain("svc_preview");
    await tab.goto(new URL(browserUrl!).origin);
    await tab.waitForFunction(() => document.querySelector("#out")?.textContent !== "loading", null, {
      timeout: 15_000,
    });
    expect(await tab.textContent("#out")).toBe("module+pong:ping");

    // `show` and `view` are `info`; `rm --json` says what it removed.
    expect((await run(["sessions", "view", id])).stdout).toContain(`session ${id}\nstatus:   running`);
    const removed = await run(["sessions", "rm", id, "--json"]);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).toEqual({ session_id: id, removed: true });
    expect((await run(["sessions", "show", id])).code).toBe(1);
    expect(await containersOf(id)).toHaveLength(0);
  });

  it("survives SIGKILL of the API mid-provision: no orphaned container, no session stuck provisioning", async () => {
    // Without the warm pool a session takes a container create, a start and a daemon's boot (over a second) to
    // become running; a pooled claim takes milliseconds and raced the kill.
    expect((await svc(["self-host", "env", "set", "SVC_POOL_SIZE=0"], { env: home.env })).code).toBe(0);
    const restart = await svc(["self-host", "restart"], { env: home.env });
    expect(restart.code, restart.stderr).toBe(0);
    const created = await run(["sessions", "new", "--no-wait"]);
    const id = created.stdout.trim();
    const pid = Number(readFileSync(join(home.env.SVC_HOME!, "run", "api.pid"), "utf8"));
    process.kill(pid, "SIGKILL");
    const restarted = await svc(["self-host", "start"], { env: home.env });
    expect(restarted.code, restarted.stderr).toBe(0);
    let info = JSON.parse((await run(["sessions", "info", id, "--json"])).stdout);
    for (let i = 0; i < 50 && info.status === "provisioning"; i++) {
      await new Promise((r) => setTimeout(r, 200));
      info = JSON.parse((await run(["sessions", "info", id, "--json"])).stdout);
    }
    expect(info.status).toBe("failed");
    expect(info.error).toBe("provisioning was interrupted");
    const left = await containersOf(id);
    expect(left, JSON.stringify(left.map((c) => [c.State, c.Status, c.Created, Date.now() / 1000]))).toHaveLength(0);
    const sessions = JSON.parse((await run(["sessions", "ls", "--json"])).stdout);
    expect(sessions.filter((s: { status: string }) => s.status === "provisioning")).toHaveLength(0);
  });

  it("listens on loopback only, yet a sandbox (after a restart too) clones, pushes and opens a CR", async () => {
    // Nothing answers on the machine's own address; sandboxes reach the API on their network's gateway.
    const health = await fetch(`http://${machineAddress()}:${port}/v1/health`, {
      signal: AbortSignal.timeout(2000),
    }).then(
      (r) => r.status,
      (err) => (err as { cause?: { code?: string } }).cause?.code ?? String(err),
    );
    expect(health).toBe("ECONNREFUSED");

    const created = await run(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    // Read once the session runs: a stop removes a sandbox network left empty, so the network (and the address the
    // API listens on) may be new since the last start.
    const logs = (await svc(["self-host", "logs", "--json"], { env: home.env })).stdout
      .split("\n")
      .map((l) => JSON.parse(l));
    const listening = logs.filter((l) => l.msg === "listening for sandboxes").at(-1);
    expect(listening.address).toMatch(new RegExp(`^\\d+\\.\\d+\\.\\d+\\.1:${port}$`));
    const [container] = await containersOf(id);
    const inspect = await docker.getContainer(container!.Id).inspect();
    expect(inspect.HostConfig.ExtraHosts).toEqual([`host.docker.internal:${listening.address.split(":")[0]}`]);

    const exec = (cmd: string) => execIn(docker, container!.Id, ["sh", "-c", cmd]);
    const push = await exec(
      "echo work > work.txt && git add work.txt && git commit -qm work && git push -q origin HEAD",
    );
    expect(push.code, push.out).toBe(0);
    const opened = await exec("svc cr open --title 'Through the gateway' --json");
    expect(opened.code, opened.out).toBe(0);
    const crs = JSON.parse((await run(["cr", "ls", "--json"])).stdout);
    expect(crs).toEqual(
      expect.arrayContaining([expect.objectContaining({ title: "Through the gateway", head_ref: id })]),
    );
    expect((await run(["sessions", "rm", id])).code).toBe(0);
  });

  it("links its sandboxes to the API through the API's socket, which a restarted API opens again", async () => {
    const socketDir = join(home.env.SVC_HOME!, "run", "sandbox-link");
    const created = await run(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const [container] = await containersOf(id);
    const inspect = await docker.getContainer(container!.Id).inspect();
    expect(inspect.Mounts).toEqual([
      expect.objectContaining({ Type: "bind", Source: socketDir, Destination: "/run/svc-link", RW: false }),
    ]);
    expect(inspect.Config.Env).toContain("SVC_LINK_SOCKET=/run/svc-link/api.sock");
    // The API's ends of connections on its socket live in the dialer's network namespace: the sandbox's list shows
    // the link and its spares by the socket's path on the host.
    const onSocket = async () => {
      const unix = await execIn(docker, container!.Id, ["cat", "/proc/net/unix"]);
      return unix.out.split("\n").filter((line) => line.endsWith(join(socketDir, "api.sock"))).length;
    };
    expect(await waitFor("the link on the socket", async () => (await onSocket()) >= 2)).toBe(true);
    const exec = async () => (await run(["sessions", "exec", id, "--", "echo", "through the socket"])).stdout.trim();
    expect(await exec()).toBe("through the socket");

    const restarted = await svc(["self-host", "restart"], { env: home.env });
    expect(restarted.code, restarted.stderr).toBe(0);
    expect(
      await waitFor("the link back on the new socket", async () => (await onSocket()) >= 2, { timeoutMs: 60_000 }),
    ).toBe(true);
    expect(await exec()).toBe("through the socket");
    expect((await run(["sessions", "rm", id])).code).toBe(0);
  });

  it("keeps the transcript through a SIGKILL of the API mid-run: what was shown stays, what the agent did meanwhile is stored", async () => {
    const llm = await startScriptedLlm([
      // After the restart the agent only has to answer: what it is shown is the point.
      { when: "once more", steps: [{ text: "Done again." }] },
      {
        when: "Take your time",
        steps: [
          { tool: "bash", args: { command: "sleep 3 && echo slept", description: "Wait a while" } },
          { text: "Done waiting." },
        ],
      },
    ]);
    try {
      const model = [`SVC_LLM_BASE_URL=${llm.url}`, "SVC_LLM_API_KEY=kill", "SVC_AGENT_MODEL=scripted"];
      expect((await svc(["self-host", "env", "set", ...model], { env: home.env })).code).toBe(0);
      expect((await svc(["self-host", "restart"], { env: home.env })).code).toBe(0);
      const id = (await run(["sessions", "new", "--prompt", "Take your time, then say so."])).stdout.trim();
      const transcript = async () => JSON.parse((await run(["sessions", "transcript", id, "--json"])).stdout);
      // Shown: the tool call running, as the dashboard and `transcript` show it.
      await waitFor(
        "the tool call shown running",
        async () => (await transcript()).some((e: { tool?: { status: string } }) => e.tool?.status === "running"),
        { timeoutMs: 90_000, everyMs: 200 },
      );
      process.kill(Number(readFileSync(join(home.env.SVC_HOME!, "run", "api.pid"), "utf8")), "SIGKILL");
      // The run goes on in the sandbox while no API listens; the next API's recorder reads it back.
      await new Promise((r) => setTimeout(r, 4000));
      const restarted = await svc(["self-host", "start"], { env: home.env });
      expect(restarted.code, restarted.stderr).toBe(0);
      const entries = await waitFor(
        "the run's end stored",
        async () => {
          const all = await transcript();
          return all.some((e: { text: string }) => e.text === "Done waiting.") && all;
        },
        { timeoutMs: 60_000, everyMs: 500 },
      );
      expect(
        entries.map((e: { role: string; text: string; tool?: { status: string; output: string } | null }) =>
          e.role === "tool" ? `tool ${e.tool!.status} ${e.tool!.output?.trim()}` : `${e.role}: ${e.text}`,
        ),
      ).toEqual(["user: Take your time, then say so.", "tool completed slept", "assistant: Done waiting."]);
      // The agent goes on after the stack's restart with its conversation: the model is shown all of it.
      const turns = llm.turns().length;
      const more = await run(["sessions", "chat", id, "--prompt", "Take your time once more."]);
      expect(more.code, more.stderr).toBe(0);
      const shown = llm.turns().slice(turns).join("\n");
      expect(shown).toContain("Take your time, then say so.");
      expect(shown).toContain("slept");
      expect(shown).toContain("Done waiting.");
      expect((await run(["sessions", "rm", id])).code).toBe(0);
    } finally {
      llm.close();
    }
  }, 300_000);
});
