import { readFileSync } from "node:fs";
import { execa } from "execa";
import { spawnBuffered } from "../../orchestrator/process-spawner.ts";
import { median } from "./stats.ts";

/** Memory the benchmark holds while it spawns: an API with PGlite holds 300-400 MB, a test worker up to 900. */
const BALLAST_MB = 400;
const COMMANDS = 60;
const ROUNDS = 3;

/** The machine's busy CPU seconds so far (/proc/stat): a fork's cost lands in the parent and in the child. */
function busySeconds(): number {
  const [, ...fields] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / 100;
}

async function cpuPerCommand(run: () => Promise<unknown>): Promise<number> {
  const before = busySeconds();
  for (let i = 0; i < COMMANDS; i++) await run();
  return ((busySeconds() - before) / COMMANDS) * 1000;
}

/**
 * `git --version` from a process holding BALLAST_MB, spawned directly (execa: a fork of this process) and through
 * the process spawner (a fork of its small helper), in alternating rounds of the same run: machine CPU per command.
 */
export async function benchSpawn(): Promise<{ ok: boolean; line: string }> {
  const ballast = Array.from({ length: BALLAST_MB }, () => Buffer.alloc(1 << 20, 1));
  await spawnBuffered({ file: "git", args: ["--version"] });
  const direct: number[] = [];
  const helper: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    direct.push(await cpuPerCommand(() => execa("git", ["--version"])));
    helper.push(await cpuPerCommand(() => spawnBuffered({ file: "git", args: ["--version"] })));
  }
  const ratio = median(helper) / median(direct);
  ballast.length = 0;
  return {
    ok: ratio < 0.5,
    line:
      `git from a process holding ${BALLAST_MB} MB: ${median(helper).toFixed(1)} ms of CPU a command through the ` +
      `process spawner, ${median(direct).toFixed(1)} ms spawned directly (${ratio.toFixed(2)}x; target < 0.5x)`,
  };
}
