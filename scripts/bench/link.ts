import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { hashSecret } from "../../protocol/credential.ts";
import { SANDBOX_LINK_PATH } from "../../protocol/sandbox-link.ts";
import { signUserContext, USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { startApi, type TestApi } from "../harness/api-server.ts";
import { startDaemon } from "../harness/daemon.ts";
import { freshDatabase } from "../harness/databases.ts";
import { freePort } from "../harness/ports.ts";
import { load, waitUntilUp } from "./load.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const KEY = `svc_sk_bench-link-${randomUUID().replaceAll("-", "")}`;
const SANDBOX = randomUUID();
const SESSION = randomUUID();
/**
 * What the link may cost a preview's page requests, against the daemon reached at its own port. Measured at 0.79 to
 * 0.80 on two busy cores once the daemon keeps spare connections (0.49 to 0.64 when every connection was an HTTP/2
 * stream over the link); the bar catches a regression, not noise.
 */
const TARGET_SHARE = 0.7;

/**
 * A preview-like GET (a rendered page from an app on a sandbox port, proxy-upstream.mjs) through the daemon's
 * `/proxy/{port}/` twice, same run: at the daemon's own port (SVC_SANDBOX_LINK=direct) and at the loopback bridge
 * of its link to the API (dial-out: the bridge, then a spare connection the daemon dialed, or an HTTP/2 CONNECT stream
 * over the link's WebSocket when none is idle). The API runs
 * in this process on PGlite, the daemon and the app in theirs, the load generator in its own.
 */
export async function benchLink() {
  const children: ChildProcess[] = [];
  const db = await freshDatabase("pglite");
  let api: TestApi | undefined;
  try {
    api = await startApi(db.sql);
    api.services.sandboxLinks.expect(hashSecret(KEY), SANDBOX);
    const daemon = await startDaemon({
      serviceKey: KEY,
      sessionId: SESSION,
      agentCommand: ["sleep", "3600"],
      env: { SVC_LINK_URL: `${api.url.replace("http:", "ws:")}${SANDBOX_LINK_PATH}` },
      stdio: "ignore",
    });
    children.push(daemon.child);
    const bridge = await api.services.sandboxLinks.waitFor(SANDBOX, 15_000);
    const port = await freePort();
    const app = spawn(process.execPath, [join(import.meta.dirname, "proxy-upstream.mjs"), "page", String(port)]);
    children.push(app);
    const headers = {
      [USER_CONTEXT_HEADER]: signUserContext(KEY, {
        user_id: "u",
        project_id: "p",
        session_id: SESSION,
        exp: Math.floor(Date.now() / 1000) + 3600,
      }),
    };
    const direct = `${daemon.base}/proxy/${port}/`;
    const linked = `${bridge}/proxy/${port}/`;
    await waitUntilUp(`http://127.0.0.1:${port}/`);
    // Warm both paths up so neither is measured while the JIT is still compiling.
    await load(direct, { headers, duration: 1 });
    await load(linked, { headers, duration: 1 });
    const directRps = (await load(direct, { headers })).requests.average;
    const linkedRps = (await load(linked, { headers })).requests.average;
    const share = linkedRps / directRps;
    // Latency added per request, one at a time so queueing does not hide it.
    const p50 = async (url: string) =>
      percentile(await timeRuns(500, () => fetch(url, { headers }).then((r) => r.text())), 50);
    const added = (await p50(linked)) - (await p50(direct));
    const line =
      `sandbox link, page app: ${Math.round(linkedRps)} req/s through the link vs ${Math.round(directRps)} at the ` +
      `daemon's port (ratio ${share.toFixed(2)}, need >= ${TARGET_SHARE}) | added p50 latency ${ms(added)} ms`;
    return { ok: share >= TARGET_SHARE, line };
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await api?.close();
    await db.drop();
  }
}
