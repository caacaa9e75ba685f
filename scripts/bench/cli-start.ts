import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { percentile } from "./stats.ts";

const BIN = fileURLToPath(new URL("../../bin/svc.js", import.meta.url));
const PAIRS = 15;
const TARGET = 2;

function wallMs(args: string[]): number {
  const start = performance.now();
  const run = spawnSync(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  if (run.status !== 0) throw new Error(`node ${args.join(" ")} exited ${run.status}: ${run.stderr}`);
  return performance.now() - start;
}

/** `svc version` against `node -e 0`, run in turn so a drifting machine moves both; the median of the pairs. */
export function benchCliStart() {
  wallMs([BIN, "version"]);
  const ratios: number[] = [];
  const cli: number[] = [];
  const node: number[] = [];
  for (let i = 0; i < PAIRS; i++) {
    const a = wallMs([BIN, "version"]);
    const b = wallMs(["-e", "0"]);
    cli.push(a);
    node.push(b);
    ratios.push(a / b);
  }
  const ratio = percentile(ratios, 50);
  return {
    ok: ratio <= TARGET,
    line: `CLI start: svc version p50 ${percentile(cli, 50).toFixed(0)} ms vs node -e 0 ${percentile(node, 50).toFixed(0)} ms = ${ratio.toFixed(2)}x (median of ${PAIRS} pairs) | target <= ${TARGET}x`,
  };
}
