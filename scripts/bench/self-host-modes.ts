// The two self-host modes side by side, in one run: first start, warm start and the API's idle resident memory.
// Compose's first start includes its image builds: the API and PostgreSQL images are removed first (--cold) when
// asked, else whatever the engine lacks is built. Run alone: `npx tsx scripts/bench/self-host-modes.ts [--cold]`.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../harness/ports.ts";

const BIN = fileURLToPath(new URL("../../bin/svc.js", import.meta.url));

type Mode = "embedded" | "compose";

function svc(home: string, args: string[]): { ms: number; stderr: string } {
  const env = { ...process.env, SVC_HOME: join(home, "svc"), SVC_CONFIG_FILE: join(home, "config.json"), CI: "true" };
  const started = performance.now();
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`svc ${args.join(" ")} failed:\n${r.stderr}`);
  return { ms: performance.now() - started, stderr: r.stderr };
}

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

const status = (home: string) =>
  JSON.parse(
    spawnSync(process.execPath, [BIN, "self-host", "status", "--json"], {
      env: { ...process.env, SVC_HOME: join(home, "svc"), SVC_CONFIG_FILE: join(home, "config.json") },
      encoding: "utf8",
    }).stdout,
  );

function apiPids(home: string, mode: Mode): number[] {
  if (mode === "embedded") return [Number(readFileSync(join(home, "svc", "run", "api.pid"), "utf8"))];
  return status(home)
    .services.filter((c: { service: string }) => c.service === "api")
    .map((c: { name: string }) =>
      Number(execFileSync("docker", ["inspect", "-f", "{{.State.Pid}}", c.name]).toString()),
    );
}

async function measure(mode: Mode) {
  const home = mkdtempSync(join(tmpdir(), `svc-bench-${mode}-`));
  const port = await freePort();
  try {
    const first = svc(home, ["self-host", "start", "--mode", mode, "--port", String(port)]);
    svc(home, ["self-host", "stop"]);
    const warm = svc(home, ["self-host", "start"]);
    await new Promise((r) => setTimeout(r, 5000));
    const rss = apiPids(home, mode).map(rssMb);
    svc(home, ["self-host", "stop"]);
    return { first: first.ms, warm: warm.ms, rss: rss[0] ?? 0, built: /built svc-/.test(first.stderr) };
  } finally {
    if (mode === "compose") {
      const project = status(home).compose_project;
      execFileSync("sh", [
        "-c",
        `docker rm -f $(docker ps -aq --filter label=com.docker.compose.project=${project}) >/dev/null 2>&1; ` +
          `docker volume rm ${project}_pgdata ${project}_data >/dev/null 2>&1; docker network rm ${project}_default >/dev/null 2>&1; true`,
      ]);
    }
    rmSync(home, { recursive: true, force: true });
  }
}

export async function benchSelfHostModes(options: { cold: boolean }): Promise<string[]> {
  if (options.cold) {
    execFileSync("sh", [
      "-c",
      "docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '^svc-(api|postgres):' | xargs -r docker rmi -f >/dev/null",
    ]);
  }
  const embedded = await measure("embedded");
  const compose = await measure("compose");
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  return [
    `self-host start, embedded: first ${s(embedded.first)}, warm ${s(embedded.warm)}; API idle RSS ${embedded.rss.toFixed(0)} MB`,
    `self-host start, compose${compose.built ? " (image builds included)" : ""}: first ${s(compose.first)} = ` +
      `${(compose.first / embedded.first).toFixed(1)}x embedded; warm ${s(compose.warm)} = ` +
      `${(compose.warm / embedded.warm).toFixed(1)}x embedded; API idle RSS ${compose.rss.toFixed(0)} MB = ` +
      `${(compose.rss / embedded.rss).toFixed(2)}x embedded`,
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log((await benchSelfHostModes({ cold: process.argv.includes("--cold") })).join("\n"));
}
