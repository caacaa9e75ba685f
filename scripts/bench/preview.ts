import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import type { DaemonHealth } from "../../protocol/daemon.ts";
import type { SandboxLinkMode } from "../../protocol/sandbox-link.ts";
import { signUserContext, USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { call, seedUser, startApi } from "../harness/api-server.ts";
import { freshDatabase } from "../harness/databases.ts";
import { orchestratorFor, removeProjectContainers, requireDocker } from "../harness/docker.ts";
import { authedUrl, workRepo } from "../harness/git-fixture.ts";
import { freePort } from "../harness/ports.ts";
import { load, waitUntilUp } from "./load.ts";
import { median } from "./stats.ts";

/** Cycles of six load rounds (see below), and each round's seconds. */
const CYCLES = 5;
const ROUND_S = 2;

type Round = Awaited<ReturnType<typeof load>>;

type PreviewStack = {
  ip: string;
  /** The API's preview of port 3000: the URL asked (the API's address) and the headers that make it the preview. */
  through: { url: string; headers: Record<string, string> };
  /** The daemon's own /proxy/3000, as the API calls it, where the daemon's port can be reached (direct only). */
  own: { url: string; headers: Record<string, string> };
  close(): Promise<void>;
};

/**
 * An API with one running sandbox, no model, whose daemon it reaches `link`-wise, and an app on the sandbox's port
 * 3000 answering a page. `socket`: the daemon dials the link through the API's Unix socket, as an embedded stack's do.
 */
async function previewStack(docker: Docker, link: SandboxLinkMode, socket = false): Promise<PreviewStack> {
  const db = await freshDatabase("pglite");
  const port = await freePort();
  const linkSocketDir = socket ? mkdtempSync(join(tmpdir(), "svc-bench-link-")) : undefined;
  const api = await startApi(db.sql, {
    host: "0.0.0.0",
    port,
    orchestrator: orchestratorFor(port, { sandboxLink: link }, linkSocketDir),
    linkSocketDir,
  });
  let projectId: string | undefined;
  const close = async () => {
    await api.close();
    await removeProjectContainers(docker, projectId, api.services.installationId);
    await db.drop();
    if (linkSocketDir) rmSync(linkSocketDir, { recursive: true, force: true });
  };
  try {
    const user = await seedUser(api.services);
    const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "bench" } })).body;
    projectId = project.id;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.commit("initial", { "README.md": "bench\n" });
    await repo.push("main");
    const sessionPath = `/v1/projects/${project.id}/sessions`;
    const sessionId = (await call(api.url, "POST", sessionPath, { token: user.token, body: {} })).body.session_id;
    for (;;) {
      const s = (await call(api.url, "GET", `${sessionPath}/${sessionId}`, { token: user.token })).body;
      if (s.status === "running") break;
      if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${sessionId}`] } });
    const target = await api.services.sessions!.sandboxTarget(project, sessionId);
    // The agent runtime's boot takes a core for seconds: it must be over before anything is measured.
    for (let i = 0; i < 600; i++) {
      const health = (await (await fetch(`${target.url}/svc/health`)).json()) as DaemonHealth;
      if (health.agent.state !== "starting") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const app = await docker.getContainer(container!.Id).exec({
      Cmd: ["/opt/svc/bin/node", "-e", "require('http').createServer((q,s)=>s.end('ok')).listen(3000)"],
    });
    await app.start({ Detach: true });
    const ip = Object.values((await docker.getContainer(container!.Id).inspect()).NetworkSettings.Networks)[0]!
      .IPAddress;
    await waitUntilUp(`http://${ip}:3000/`);
    const preview = new URL(
      (await call(api.url, "POST", `${sessionPath}/${sessionId}/previews`, { token: user.token, body: { port: 3000 } }))
        .body.url,
    );
    const context = signUserContext(target.serviceKey, {
      user_id: user.userId,
      project_id: project.id,
      session_id: sessionId,
      exp: Math.floor(Date.now() / 1000) + 3600,
    });
    return {
      ip,
      // The preview's own host, asked at the API's address: `*.localhost` is loopback to browsers, not to autocannon.
      through: {
        url: `${api.url}/asset.js`,
        headers: { host: preview.host, cookie: `svc_preview=${preview.searchParams.get("svc_preview")}` },
      },
      own: { url: `${target.url}/proxy/3000/asset.js`, headers: { [USER_CONTEXT_HEADER]: context } },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * A page's requests through a preview link (API, then the sandbox daemon over the link it dialed through the API's
 * socket: an embedded stack's default) against the daemon's own /proxy route reached at its port, which only a
 * `direct` sandbox opens; the same link over the sandbox network's bridge (compose mode's), an API that dials the
 * daemon, and the app at the container's address, for scale. `npm run bench -- preview`.
 */
export async function benchPreviewAlone() {
  const docker = await requireDocker();
  const stacks: PreviewStack[] = [];
  try {
    const direct = await previewStack(docker, "direct");
    stacks.push(direct);
    const linked = await previewStack(docker, "dial-out");
    stacks.push(linked);
    const socketed = await previewStack(docker, "dial-out", true);
    stacks.push(socketed);
    await new Promise((r) => setTimeout(r, 1000));
    const app = await load(`http://${direct.ip}:3000/`);
    const paths = {
      own: () => load(direct.own.url, { headers: direct.own.headers, duration: ROUND_S }),
      linked: () => load(linked.through.url, { headers: linked.through.headers, duration: ROUND_S }),
      socketed: () => load(socketed.through.url, { headers: socketed.through.headers, duration: ROUND_S }),
      dialed: () => load(direct.through.url, { headers: direct.through.headers, duration: ROUND_S }),
    };
    // Each path once before the cycles: the JIT warm, and the link's spares grown to the load's 16 connections.
    for (const path of Object.values(paths)) await path();
    // This machine's speed drifts by a fifth within a minute (the same path measured twice in a row differs as
    // much as the paths do). So each cycle runs the paths forth and back (own, socketed, linked, dialed, then the
    // reverse): a steady drift weighs on both ends of each cycle's ratios alike, and the median cycle leaves out the
    // odd one that a burst landed in.
    const order = ["own", "socketed", "linked", "dialed"] as const;
    type Path = (typeof order)[number];
    const cycles: (Record<Path, number> & { ownP50: number; socketedP50: number })[] = [];
    for (let i = 0; i < CYCLES; i++) {
      const runs = Object.fromEntries(order.map((p) => [p, [] as Round[]])) as Record<Path, Round[]>;
      for (const path of [...order, ...[...order].reverse()]) runs[path].push(await paths[path]());
      const rate = (rounds: Round[]) =>
        rounds.reduce((n, r) => n + r.requests.total, 0) / rounds.reduce((n, r) => n + r.duration, 0);
      const p50 = (rounds: Round[]) => rounds.reduce((n, r) => n + r.latency.p50, 0) / rounds.length;
      cycles.push({
        own: rate(runs.own),
        socketed: rate(runs.socketed),
        linked: rate(runs.linked),
        dialed: rate(runs.dialed),
        ownP50: p50(runs.own),
        socketedP50: p50(runs.socketed),
      });
    }
    const shares = cycles.map((c) => c.socketed / c.own).sort((x, y) => x - y);
    const share = median(shares);
    const added = median(cycles.map((c) => c.socketedP50 - c.ownP50));
    const pct = (n: number) => `${(n * 100).toFixed(0)}%`;
    const rps = (path: Path) => Math.round(median(cycles.map((c) => c[path])));
    const of = (path: Path) => pct(median(cycles.map((c) => c[path] / c.own)));
    return {
      ok: share >= 0.75 && added <= 1,
      line:
        `preview through the API, the daemon's link on the API's socket (an embedded stack): ${rps("socketed")} req/s = ${pct(share)} of the daemon's own /proxy/3000 ${rps("own")} req/s (median of ${CYCLES} cycles, ${pct(shares[0]!)} to ${pct(shares.at(-1)!)}), p50 added ${added} ms | target >= 75%, <= 1 ms` +
        ` (the link over the sandbox network, as in compose mode: ${of("linked")}; an API dialing the daemon: ${of("dialed")}; the app at the container's address: ${Math.round(app.requests.average)} req/s)`,
    };
  } finally {
    for (const stack of stacks.reverse()) await stack.close();
  }
}
