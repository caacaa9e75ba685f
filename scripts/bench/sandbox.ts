import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { signUserContext } from "../../protocol/user-context.ts";
import { call, seedUser, startApi } from "../../test/support/api-server.ts";
import { freePort } from "../../test/support/cli.ts";
import { freshDatabase } from "../../test/support/databases.ts";
import { orchestratorFor, requireDocker } from "../../test/support/docker.ts";
import { authedUrl, workRepo } from "../../test/support/git-fixture.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const SESSIONS = 10;

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
      ],
    };
  } finally {
    await api.close();
    await db.drop();
  }
}

/** The daemon's proxy against direct requests to the same upstream, same run. */
export async function benchDaemonProxy() {
  // The upstream runs in its own process, like a dev server in a sandbox; the load generator is this process.
  const upstreamPort = await freePort();
  const upstream = spawn(process.execPath, [
    "-e",
    `require("http").createServer((q, s) => s.end("ok")).listen(${upstreamPort}, "127.0.0.1")`,
  ]);
  const daemonPort = await freePort();
  const key = "svc_sk_bench-service-key-00000000000000";
  const daemon = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "../../daemon/main.ts")], {
    env: {
      ...process.env,
      SVC_TOKEN: key,
      SVC_SESSION_ID: "bench",
      SVC_SERVICE_PORT: String(daemonPort),
      SVC_LISTEN_HOST: "127.0.0.1",
      SVC_WORKSPACE: mkdtempSync(join(tmpdir(), "svc-bench-ws-")),
      SVC_AGENT_HOME: mkdtempSync(join(tmpdir(), "svc-bench-home-")),
      SVC_AGENT_PORT: String(upstreamPort),
      SVC_AGENT_COMMAND: JSON.stringify(["sleep", "3600"]),
    },
    stdio: "ignore",
  });
  try {
    for (let i = 0; i < 100; i++) {
      if (
        await fetch(`http://127.0.0.1:${daemonPort}/svc/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const header = signUserContext(key, {
      user_id: "u",
      project_id: "p",
      session_id: "bench",
      exp: Math.floor(Date.now() / 1000) + 3600,
    });
    const run = (url: string, headers: Record<string, string> = {}) =>
      autocannon({ url, connections: 16, duration: 5, headers });
    const direct = await run(`http://127.0.0.1:${upstreamPort}/`);
    const proxied = await run(`http://127.0.0.1:${daemonPort}/proxy/${upstreamPort}/`, {
      "x-svc-user-context": header,
    });
    if (proxied.non2xx > 0) throw new Error(`${proxied.non2xx} proxied requests failed`);
    // Latency added per request, measured one at a time so queueing does not hide it.
    const single = async (url: string, headers: Record<string, string> = {}) => {
      const samples = await timeRuns(500, () => fetch(url, { headers }).then((r) => r.text()));
      return percentile(samples, 50);
    };
    const directP50 = await single(`http://127.0.0.1:${upstreamPort}/`);
    const proxiedP50 = await single(`http://127.0.0.1:${daemonPort}/proxy/${upstreamPort}/`, {
      "x-svc-user-context": header,
    });
    const share = proxied.requests.average / direct.requests.average;
    const added = proxiedP50 - directP50;
    return {
      ok: share >= 0.7 && added < 1,
      lines: [
        `daemon proxy: ${Math.round(proxied.requests.average)} req/s vs direct ${Math.round(direct.requests.average)} req/s (${(share * 100).toFixed(0)}%, need >= 70%) | added p50 latency ${ms(added)} ms (need < 1 ms)`,
      ],
    };
  } finally {
    daemon.kill("SIGKILL");
    upstream.kill("SIGKILL");
  }
}
