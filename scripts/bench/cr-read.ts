import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { roundsSummary as summary } from "./stats.ts";

const SERVER = fileURLToPath(new URL("./cr-server.ts", import.meta.url));
// Health and the CR read take turns, a round each at a time: load from anything else on the machine then falls on
// both sides of the ratio alike instead of on whichever ran during it.
const ROUNDS = 4;
const ROUND_S = 2;
const CONNECTIONS = 32;

type Served = { url: string; token: string; crPath: string; crId: string };

async function startServer(env: Record<string, string>) {
  const child = spawn(process.execPath, ["--import", "tsx", SERVER], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`bench server exited ${code}`)));
  });
  return { served: JSON.parse(line) as Served, stop: () => child.kill("SIGKILL") };
}

async function load(url: string, headers: Record<string, string>) {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: ROUND_S, headers });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result;
}

/** GET of an open CR (auth, row, live-branch refresh) against GET /v1/health on the same server. */
export async function benchCrRead(database: "pglite" | "postgres", databaseUrl?: string) {
  const { served, stop } = await startServer(databaseUrl ? { DATABASE_URL: databaseUrl } : {});
  try {
    const headers = { authorization: `Bearer ${served.token}` };
    const check = await fetch(served.url + served.crPath, { headers });
    const body = (await check.json()) as { change_request?: { cr_id: string } };
    if (body.change_request?.cr_id !== served.crId) throw new Error("the CR read answered the wrong thing");
    const healthRounds: autocannon.Result[] = [];
    const crRounds: autocannon.Result[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      healthRounds.push(await load(`${served.url}/v1/health`, {}));
      crRounds.push(await load(served.url + served.crPath, headers));
    }
    const health = summary(healthRounds);
    const cr = summary(crRounds);
    const ratio = cr.rps / health.rps;
    // The target is for the embedded database; PostgreSQL's figure is printed against the same bar.
    return {
      ok: database === "postgres" || ratio >= 0.6,
      line: `CR read (${database}): ${Math.round(cr.rps)} req/s (p50 ${cr.p50} ms, p99 ${cr.p99} ms) vs health ${Math.round(health.rps)} req/s = ${ratio.toFixed(2)}x | target >= 0.6x`,
    };
  } finally {
    stop();
  }
}
