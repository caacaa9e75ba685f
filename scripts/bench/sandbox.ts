import { execFileSync } from "node:child_process";
import type Docker from "dockerode";
import { call, seedUser, startApi } from "../harness/api-server.ts";
import { freshDatabase } from "../harness/databases.ts";
import { orchestratorFor, requireDocker } from "../harness/docker.ts";
import { authedUrl, workRepo } from "../harness/git-fixture.ts";
import { freePort } from "../harness/ports.ts";
import { load, waitUntilUp } from "./load.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const SESSIONS = 10;

/**
 * A page's requests through a preview link (API, then the sandbox daemon) against the same app reached directly
 * at the container's address: what the whole preview chain costs per request.
 */
async function benchPreview(docker: Docker, containerId: string, apiUrl: string, sessionPath: string, token: string) {
  const app = await docker.getContainer(containerId).exec({
    Cmd: ["/opt/svc/bin/node", "-e", "require('http').createServer((q,s)=>s.end('ok')).listen(3000)"],
  });
  await app.start({ Detach: true });
  const ip = Object.values((await docker.getContainer(containerId).inspect()).NetworkSettings.Networks)[0]!.IPAddress;
  const link = (await call(apiUrl, "POST", `${sessionPath}/previews`, { token, body: { port: 3000 } })).body;
  const grant = new URL(link.url).searchParams.get("svc_preview");
  const through = `${link.url.split("?")[0]}asset.js`;
  await waitUntilUp(`http://${ip}:3000/`);
  const direct = await load(`http://${ip}:3000/`);
  const proxied = await load(through, { headers: { cookie: `svc_preview=${grant}` } });
  return `preview link through the API: ${Math.round(proxied.requests.average)} req/s (p50 ${proxied.latency.p50} ms) vs the app at the container's address ${Math.round(direct.requests.average)} req/s (p50 ${direct.latency.p50} ms): ${((proxied.requests.average / direct.requests.average) * 100).toFixed(0)}%`;
}

/** Session create -> running with a cached image, against a bare `docker run --rm <image> true`. */
export async function benchSessionStart() {
  const docker = await requireDocker();
  const db = await freshDatabase("pglite");
  const port = await freePort();
  const api = await startApi(db.sql, {
    host: "0.0.0.0",
    port,
    orchestrator: orchestratorFor(port, { sessionCap: 100 }),
  });
  try {
    const user = await seedUser(api.services);
    const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "bench" } })).body;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.commit("initial", { "README.md": "bench\n" });
    await repo.push("main");
    const sessions = (suffix = "", method = "GET") =>
      call(api.url, method, `/v1/projects/${project.id}/sessions${suffix}`, { token: user.token });
    const startOne = async () => {
      const created = (await sessions("", "POST")).body;
      for (;;) {
        const s = (await sessions(`/${created.session_id}`)).body;
        if (s.status === "running") return created.session_id as string;
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const warm = await startOne(); // builds (or finds) the image: not measured
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${warm}`] } });
    const image = container!.Image;
    await new Promise((r) => setTimeout(r, 3000));
    const rss = execFileSync("docker", [
      "exec",
      container!.Id,
      "sh",
      "-c",
      "ps -o rss= -o args= | grep svc-agent.mjs | grep -v grep",
    ])
      .toString()
      .trim();
    const rssMb = Number(rss.split(/\s+/)[0]) / 1024;
    const preview = await benchPreview(
      docker,
      container!.Id,
      api.url,
      `/v1/projects/${project.id}/sessions/${warm}`,
      user.token,
    );
    await sessions(`/${warm}`, "DELETE");

    const bare = await timeRuns(SESSIONS, async () =>
      execFileSync("docker", ["run", "--rm", "--entrypoint", "true", image]),
    );
    const ids: string[] = [];
    const starts = await timeRuns(SESSIONS, async () => {
      const id = await startOne();
      ids.push(id);
      await sessions(`/${id}`, "DELETE");
    });
    const ratio = percentile(starts, 50) / percentile(bare, 50);
    return {
      ok: ratio <= 3 && rssMb < 60,
      lines: [
        `session create -> running (cached image, ${SESSIONS} runs): p50 ${ms(percentile(starts, 50))} ms, p95 ${ms(percentile(starts, 95))} ms | bare docker run --rm true p50 ${ms(percentile(bare, 50))} ms | ratio ${ratio.toFixed(2)}x (need <= 3x)`,
        `idle svc-agent RSS: ${rssMb.toFixed(1)} MB (need < 60 MB)`,
        preview,
      ],
    };
  } finally {
    await api.close();
    await db.drop();
  }
}
