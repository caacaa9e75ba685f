import type Docker from "dockerode";
import type { DaemonHealth } from "../../protocol/daemon.ts";
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

/**
 * A page's requests through a preview link (API, then the sandbox daemon) against the same app reached directly
 * at the container's address: what the whole preview chain costs per request.
 */
async function benchPreview(
  docker: Docker,
  containerId: string,
  apiUrl: string,
  sessionPath: string,
  token: string,
  daemon: { url: string; serviceKey: string; userId: string; projectId: string; sessionId: string },
) {
  const app = await docker.getContainer(containerId).exec({
    Cmd: ["/opt/svc/bin/node", "-e", "require('http').createServer((q,s)=>s.end('ok')).listen(3000)"],
  });
  await app.start({ Detach: true });
  const ip = Object.values((await docker.getContainer(containerId).inspect()).NetworkSettings.Networks)[0]!.IPAddress;
  const link = (await call(apiUrl, "POST", `${sessionPath}/previews`, { token, body: { port: 3000 } })).body;
  const preview = new URL(link.url);
  const grant = preview.searchParams.get("svc_preview");
  // The preview's own host, asked at the API's address: `*.localhost` is loopback to browsers, not to autocannon.
  const through = `${apiUrl}/asset.js`;
  const previewHeaders = { host: preview.host, cookie: `svc_preview=${grant}` };
  await waitUntilUp(`http://${ip}:3000/`);
  const direct = await load(`http://${ip}:3000/`);
  // The daemon's own preview route, as the API calls it: its figure is the one the API's must approach.
  const context = signUserContext(daemon.serviceKey, {
    user_id: daemon.userId,
    project_id: daemon.projectId,
    session_id: daemon.sessionId,
    exp: Math.floor(Date.now() / 1000) + 3600,
  });
  // The two take turns, a round each at a time: load from anything else on the machine then falls on both sides
  // of the ratio alike instead of on whichever ran during it.
  const ownRounds: Awaited<ReturnType<typeof load>>[] = [];
  const proxiedRounds: Awaited<ReturnType<typeof load>>[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    ownRounds.push(
      await load(`${daemon.url}/proxy/3000/asset.js`, {
        headers: { [USER_CONTEXT_HEADER]: context },
        duration: ROUND_S,
      }),
    );
    proxiedRounds.push(await load(through, { headers: previewHeaders, duration: ROUND_S }));
  }
  const own = roundsSummary(ownRounds);
  const proxied = roundsSummary(proxiedRounds);
  const share = proxied.rps / own.rps;
  const added = proxied.p50 - own.p50;
  return {
    ok: share >= 0.75 && added <= 1,
    line:
      `preview link through the API: ${Math.round(proxied.rps)} req/s (p50 ${proxied.p50} ms) = ${(share * 100).toFixed(0)}% of the daemon's own /proxy/3000 ${Math.round(own.rps)} req/s (p50 ${own.p50} ms), p50 added ${added} ms | target >= 75%, <= 1 ms` +
      ` (the app at the container's address: ${Math.round(direct.requests.average)} req/s)`,
  };
}

/**
 * The preview figure on its own (`npm run bench -- preview`): an API with one running sandbox, no model, so the
 * proxy can be measured in seconds rather than after the session-start runs.
 */
export async function benchPreviewAlone() {
  const docker = await requireDocker();
  const db = await freshDatabase("pglite");
  const port = await freePort();
  const api = await startApi(db.sql, { host: "0.0.0.0", port, orchestrator: orchestratorFor(port) });
  let projectId: string | undefined;
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
    await new Promise((r) => setTimeout(r, 1000));
    return await benchPreview(docker, container!.Id, api.url, `${sessionPath}/${sessionId}`, user.token, {
      ...target,
      userId: user.userId,
      projectId: project.id,
      sessionId,
    });
  } finally {
    await api.close();
    await removeProjectContainers(docker, projectId, api.services.installationId);
    await db.drop();
  }
}
