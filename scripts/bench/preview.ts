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
import { roundsSummary } from "./stats.ts";

const ROUNDS = 3;
const ROUND_S = 2;

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
 * 3000 answering a page.
 */
async function previewStack(docker: Docker, link: SandboxLinkMode): Promise<PreviewStack> {
  const db = await freshDatabase("pglite");
  const port = await freePort();
  const api = await startApi(db.sql, {
    host: "0.0.0.0",
    port,
    orchestrator: orchestratorFor(port, { sandboxLink: link }),
  });
  let projectId: string | undefined;
  const close = async () => {
    await api.close();
    await removeProjectContainers(docker, projectId, api.services.installationId);
    await db.drop();
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
 * A page's requests through a preview link (API, then the sandbox daemon over the link it dialed: the default)
 * against the daemon's own /proxy route reached at its port, which only a `direct` sandbox opens; the same through
 * an API that dials the daemon, and the app at the container's address, for scale. `npm run bench -- preview`.
 */
export async function benchPreviewAlone() {
  const docker = await requireDocker();
  const stacks: PreviewStack[] = [];
  try {
    const direct = await previewStack(docker, "direct");
    stacks.push(direct);
    const linked = await previewStack(docker, "dial-out");
    stacks.push(linked);
    await new Promise((r) => setTimeout(r, 1000));
    const app = await load(`http://${direct.ip}:3000/`);
    // Each path once before the rounds: the JIT warm, and the link's spares grown to the load's 16 connections.
    await load(direct.own.url, { headers: direct.own.headers, duration: 1 });
    await load(linked.through.url, { headers: linked.through.headers, duration: 1 });
    await load(direct.through.url, { headers: direct.through.headers, duration: 1 });
    // They take turns, a round each at a time: load from anything else on the machine then falls on every side of
    // the ratios alike instead of on whichever ran during it.
    type Round = Awaited<ReturnType<typeof load>>;
    const rounds = { own: [] as Round[], linked: [] as Round[], direct: [] as Round[] };
    for (let i = 0; i < ROUNDS; i++) {
      rounds.own.push(await load(direct.own.url, { headers: direct.own.headers, duration: ROUND_S }));
      rounds.linked.push(await load(linked.through.url, { headers: linked.through.headers, duration: ROUND_S }));
      rounds.direct.push(await load(direct.through.url, { headers: direct.through.headers, duration: ROUND_S }));
    }
    const own = roundsSummary(rounds.own);
    const overLink = roundsSummary(rounds.linked);
    const dialed = roundsSummary(rounds.direct);
    const share = overLink.rps / own.rps;
    const added = overLink.p50 - own.p50;
    return {
      ok: share >= 0.75 && added <= 1,
      line:
        `preview link through the API over the daemon's link: ${Math.round(overLink.rps)} req/s (p50 ${overLink.p50} ms) = ${(share * 100).toFixed(0)}% of the daemon's own /proxy/3000 ${Math.round(own.rps)} req/s (p50 ${own.p50} ms), p50 added ${added} ms | target >= 75%, <= 1 ms` +
        ` (an API dialing the daemon: ${Math.round(dialed.rps)} req/s = ${((dialed.rps / own.rps) * 100).toFixed(0)}%; the app at the container's address: ${Math.round(app.requests.average)} req/s)`,
    };
  } finally {
    for (const stack of stacks.reverse()) await stack.close();
  }
}
