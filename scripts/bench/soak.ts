import { readdirSync } from "node:fs";
import { requireDocker } from "../harness/docker.ts";
import { benchStack } from "./sandbox.ts";
import { ms, percentile } from "./stats.ts";

const CYCLES = 100;

/**
 * 100 sessions created, run and stopped one after another on a warm pool: how long each step takes, and whether
 * anything is left behind or grows (containers, networks, volumes of the installation; the API process's memory and
 * open descriptors; the API runs in this process).
 */
export async function benchSoak(cycles = CYCLES) {
  const docker = await requireDocker();
  const stack = await benchStack(1);
  const installation = stack.api.services.installationId;
  const label = { label: [`dev.svc.installation=${installation}`] };
  const objects = async () => ({
    containers: (await docker.listContainers({ all: true, filters: label })).filter((c) => !c.Labels["dev.svc.pool"])
      .length,
    networks: (await docker.listNetworks({ filters: label })).length,
    volumes: ((await docker.listVolumes({ filters: label })).Volumes ?? []).length,
  });
  const process_ = () => ({
    rssMb: process.memoryUsage().rss / 2 ** 20,
    heapMb: process.memoryUsage().heapUsed / 2 ** 20,
    fds: readdirSync("/proc/self/fd").length,
  });
  try {
    // The first session builds the image and asks for the pool: not measured.
    await stack.sessions(`/${await stack.startOne()}/stop`, "POST");
    const before = { ...(await objects()), ...process_() };
    const starts: number[] = [];
    const stops: number[] = [];
    for (let i = 0; i < cycles; i++) {
      const t0 = performance.now();
      const id = await stack.startOne();
      const t1 = performance.now();
      const stopped = await stack.sessions(`/${id}/stop`, "POST");
      if (stopped.status !== 200) throw new Error(`stop answered ${stopped.status}: ${JSON.stringify(stopped.body)}`);
      starts.push(t1 - t0);
      stops.push(performance.now() - t1);
    }
    global.gc?.();
    const after = { ...(await objects()), ...process_() };
    const leaked = after.containers + Math.max(0, after.networks - before.networks) + after.volumes;
    const line = (name: string, s: number[]) =>
      `${name} p50 ${ms(percentile(s, 50))} ms, p95 ${ms(percentile(s, 95))} ms`;
    return {
      ok: leaked === 0,
      lines: [
        `soak, ${cycles} create -> running -> stop cycles (warm pool): ${line("create -> running", starts)} | ${line("stop", stops)}`,
        `soak, left behind: ${after.containers} session containers, ${after.networks - before.networks} networks more, ${after.volumes} volumes (need 0) | API process: RSS ${before.rssMb.toFixed(0)} -> ${after.rssMb.toFixed(0)} MB, heap ${before.heapMb.toFixed(0)} -> ${after.heapMb.toFixed(0)} MB, open descriptors ${before.fds} -> ${after.fds}`,
      ],
    };
  } finally {
    await stack.close();
  }
}
