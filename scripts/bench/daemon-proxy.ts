import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { signUserContext } from "../../protocol/user-context.ts";
import { startDaemon } from "../harness/daemon.ts";
import { freePort } from "../harness/ports.ts";
import { load, waitUntilUp } from "./load.ts";
import { startNginxReference } from "./nginx-reference.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const KEY = "svc_sk_bench-service-key-00000000000000";
const UPSTREAMS = ["page", "asset", "empty"] as const;

/**
 * The daemon's `/proxy/{port}/` against direct requests to the same sandbox port, same run, for three kinds
 * of app on that port (see proxy-upstream.mjs). The daemon runs from source in its own process, the app in
 * another, the load generator in this one, as in a sandbox. The 70% target is checked on the rendered page,
 * the kind of app a preview shows; the empty answer is the floor, printed beside nginx when it is installed.
 */
export async function benchDaemonProxy() {
  const children: ChildProcess[] = [];
  const stops: (() => void)[] = [];
  try {
    const daemon = await startDaemon({
      serviceKey: KEY,
      sessionId: "bench",
      agentCommand: ["sleep", "3600"],
      stdio: "ignore",
    });
    children.push(daemon.child);
    const daemonPort = daemon.port;
    const header = {
      "x-svc-user-context": signUserContext(KEY, {
        user_id: "u",
        project_id: "p",
        session_id: "bench",
        exp: Math.floor(Date.now() / 1000) + 3600,
      }),
    };

    const lines: string[] = [];
    let pageShare = 0;
    let added = Number.POSITIVE_INFINITY;
    for (const kind of UPSTREAMS) {
      const port = await freePort();
      const app = spawn(process.execPath, [join(import.meta.dirname, "proxy-upstream.mjs"), kind, String(port)]);
      children.push(app);
      const direct = `http://127.0.0.1:${port}/`;
      const proxied = `http://127.0.0.1:${daemonPort}/proxy/${port}/`;
      await waitUntilUp(direct);
      // Warm both paths up so neither is measured while the JIT is still compiling.
      await load(direct, { duration: 1 });
      await load(proxied, { headers: header, duration: 1 });
      const directRps = (await load(direct)).requests.average;
      const proxiedRps = (await load(proxied, { headers: header })).requests.average;
      const share = proxiedRps / directRps;
      let line = `daemon proxy, ${kind.padEnd(5)} app: ${Math.round(proxiedRps)} req/s vs direct ${Math.round(directRps)} (${(share * 100).toFixed(0)}%)`;
      if (kind === "page") {
        pageShare = share;
        line += ", need >= 70%";
        // Latency added per request, one at a time so queueing does not hide it.
        const p50 = async (url: string, headers: Record<string, string> = {}) =>
          percentile(await timeRuns(500, () => fetch(url, { headers }).then((r) => r.text())), 50);
        added = (await p50(proxied, header)) - (await p50(direct));
        line += ` | added p50 latency ${ms(added)} ms (need < 1 ms)`;
      }
      if (kind === "empty") {
        const nginxPort = await freePort();
        const nginx = startNginxReference(nginxPort, port);
        if (nginx) {
          stops.push(nginx.stop);
          await waitUntilUp(`http://127.0.0.1:${nginxPort}/proxy/${port}/`);
          const nginxRps = (await load(`http://127.0.0.1:${nginxPort}/proxy/${port}/`, { strict: false })).requests
            .average;
          line += `; nginx in front of the same app: ${Math.round(nginxRps)} (${((nginxRps / directRps) * 100).toFixed(0)}%), daemon/nginx ${(proxiedRps / nginxRps).toFixed(2)}x`;
        } else line += "; nginx reference skipped (not installed)";
      }
      lines.push(line);
    }
    return { ok: pageShare >= 0.7 && added < 1, lines };
  } finally {
    for (const stop of stops) stop();
    for (const child of children) child.kill("SIGTERM");
  }
}
