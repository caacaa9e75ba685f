import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { requireDocker } from "../harness/docker.ts";
import { benchStack } from "./sandbox.ts";
import { ms, percentile } from "./stats.ts";

const BIN = new URL("../../bin/svc.js", import.meta.url).pathname;
const SPACED = 3;
const SPACING_MS = 30_000;
const BURST = 5;

/**
 * `svc sessions new` as a person runs it (the real CLI, which returns once the session is running), with a warm
 * pool, against `docker run` of the same image in the same run: sessions 30 s apart (the pool has refilled), then
 * five back to back twice, 30 s apart. The first burst finds the pool at its size (SVC_POOL_SIZE=1, two after the
 * spaced sessions): nothing could have told it five were coming. The pool grows to the burst it saw, so the second
 * is the one the target is for: its last session must find a warm sandbox. Each `docker run` is timed right after
 * the commands it is compared with, so a drifting machine moves both.
 */
export async function benchCliSessions() {
  const docker = await requireDocker();
  const stack = await benchStack(1);
  try {
    const dir = mkdtempSync(join(tmpdir(), "svc-bench-cli-"));
    const env = {
      SVC_HOME: join(dir, "home"),
      SVC_CONFIG_FILE: join(dir, "config.json"),
      SVC_API_URL: `${stack.api.url}/v1`,
      SVC_CLI_TOKEN: stack.user.token,
      SVC_PROJECT_ID: stack.project.id,
      NO_COLOR: "1",
    };
    const sessionsNew = async () => {
      const start = performance.now();
      const run = await execa(process.execPath, [BIN, "sessions", "new"], { env, reject: false });
      if (run.exitCode !== 0) throw new Error(`svc sessions new exited ${run.exitCode}: ${run.stderr}`);
      return { ms: performance.now() - start, id: run.stdout.trim() };
    };
    // The first session makes the image and asks for the pool: not measured.
    const first = await sessionsNew();
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${first.id}`] } });
    const image = container!.Image;
    const dockerRun = async () => {
      const start = performance.now();
      await execa("docker", ["run", "--rm", "--entrypoint", "true", image]);
      return performance.now() - start;
    };
    const created = [first.id];
    const spaced: number[] = [];
    const spacedBare: number[] = [];
    for (let i = 0; i < SPACED; i++) {
      await new Promise((r) => setTimeout(r, SPACING_MS));
      const one = await sessionsNew();
      created.push(one.id);
      spaced.push(one.ms);
      spacedBare.push(await dockerRun());
    }
    const burst = async () => {
      await new Promise((r) => setTimeout(r, SPACING_MS));
      const times: number[] = [];
      for (let i = 0; i < BURST; i++) {
        const one = await sessionsNew();
        created.push(one.id);
        times.push(one.ms);
      }
      const bare: number[] = [];
      for (let i = 0; i < BURST; i++) bare.push(await dockerRun());
      return { times, bare: percentile(bare, 50) };
    };
    const quietBurst = await burst();
    const nextBurst = await burst();
    for (const id of created) await stack.sessions(`/${id}`, "DELETE");

    const p50 = (s: number[]) => percentile(s, 50);
    const spacedRatio = p50(spaced) / p50(spacedBare);
    const burstLine = (name: string, b: typeof quietBurst, target: string) =>
      `svc sessions new x${BURST} back to back, ${name}: ${b.times.map(ms).join(", ")} ms | docker run --rm p50 ${ms(b.bare)} ms | last ${(b.times.at(-1)! / b.bare).toFixed(2)}x, slowest ${(Math.max(...b.times) / b.bare).toFixed(2)}x${target}`;
    return {
      ok: spacedRatio <= 1 && nextBurst.times.at(-1)! / nextBurst.bare <= 1.5,
      lines: [
        `svc sessions new -> running, warm pool, ${SPACED} sessions 30 s apart: p50 ${ms(p50(spaced))} ms | docker run --rm p50 ${ms(p50(spacedBare))} ms | ratio ${spacedRatio.toFixed(2)}x | target <= 1.0x`,
        burstLine("first burst (pool at its size)", quietBurst, ""),
        burstLine("the next burst 30 s later", nextBurst, " | target last <= 1.5x"),
      ],
    };
  } finally {
    await stack.close();
  }
}
