import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { freePort } from "./cli.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export type ApiProcess = Awaited<ReturnType<typeof startApiProcess>>;

/**
 * The API process as `svc self-host start` runs it (the bundle, built once per run), without sessions unless `env`
 * says otherwise, nothing of this process's SVC_ settings inherited; its stdout and stderr kept.
 */
export async function startApiProcess(env: Record<string, string>, options: { port?: number } = {}) {
  const port = options.port ?? (await freePort());
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("SVC_") && k !== "DATABASE_URL"),
  );
  const child: ChildProcess = spawn(process.execPath, ["dist/api.mjs"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...inherited, SVC_PORT: String(port), SVC_ORCHESTRATOR: "off", ...env },
  });
  const log: string[] = [];
  child.stdout!.on("data", (chunk: Buffer) => log.push(chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => log.push(chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  const deadline = started + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the API exited: ${log.join("")}`);
    if (
      await fetch(`${url}/v1/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error("the API did not become healthy");
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    /** Milliseconds from the spawn until /v1/health answered. */
    readyMs: Date.now() - started,
    log: () => log.join(""),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
