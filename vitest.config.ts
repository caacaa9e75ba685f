import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import HeaviestFirst from "./test/support/heaviest-first.ts";
import { tierFiles } from "./test/support/tiers.ts";

// Node reads NODE_EXTRA_CA_CERTS at every start: with this machine's whole system bundle named there, a process
// that starts spends 0.11 CPU-s where it would spend 0.03, and a run starts some 1,800 (the CLI, API bundles, local
// daemons). The suite's processes speak TLS to nothing but the npm registry, which Node's own roots serve.
delete process.env.NODE_EXTRA_CA_CERTS;

// The tiers, file by file (test/support/tiers.ts): a test file in no tier fails here, before anything runs.
const tiers = tierFiles(fileURLToPath(new URL(".", import.meta.url)));
// The CLI bundle the api and docker tiers' tests spawn, built once per run; unit tests need none.
const BUILD = "test/support/build-once.ts";

/** Files run at once in each group: SVC_TEST_WORKERS, else three (below). */
function workers(): number {
  const value = process.env.SVC_TEST_WORKERS;
  if (value === undefined || value === "") return 3;
  if (!/^[1-9][0-9]*$/.test(value))
    throw new Error(`SVC_TEST_WORKERS must be a whole number of workers, not '${value}'`);
  return Number(value);
}

// Three files at a time in each group (README, "Test and measure", has the measurements). The machine has two cores,
// but on two workers the Docker tier's files left an eighth of them idle (their waits: sandboxes and agents booting,
// health checks, timers) and a third worker fills it: the first group in 526 s / 1014 CPU-s against 650 s / 1136, run
// in turn the same hour; the api tier and the Swarm files likewise (261 s against 274, the same CPU). Vitest runs a
// group's projects on one pool of workers, so a group's tiers share one count; a tier on its own (npm run test:unit)
// starts at once anyway.
// The unit, api and Docker tiers' files share their workers' module graphs (isolate: false): they hold no
// process-wide state (each file closes the servers, stacks and containers it starts and sets no environment), and a
// process per file cost the unit tier 24 CPU-s where sharing costs 9.5, the api tier 727 CPU-s where sharing costs
// 602 (62 s of imports against 11; each tier alone, shuffled or not, all green); a whole run spent 145 s importing
// where sharing spends 32. The Swarm files keep a process each: the tests' swarm counts its users by process.
const SHARED_PROCESS = new Set(["unit", "api", "docker"]);
const tier = (name: string, include: string[], globalSetup: string[] = [], groupOrder = 0) => ({
  extends: true as const,
  test: {
    name,
    include,
    globalSetup,
    maxWorkers: workers(),
    sequence: { groupOrder },
    isolate: !SHARED_PROCESS.has(name),
  },
});

// Two groups, one after the other: the Docker tier (with the unit tier) first, then the api tier with the Docker tier's
// Swarm files. A swarm made, joined by a second engine and left on the machine's engine cut the published ports of
// compose-mode stacks running at that moment (seen in whole runs, never with either alone), so no Swarm file runs
// beside the compose-mode one; the api tier, on loopback only, keeps the second group's two workers busy. The Swarm
// files are still the Docker tier's (`npm run test:docker` runs both).
const SWARM = /(^|\/)(swarm-[\w-]+|self-host-swarm)\.test\.ts$/;
const swarmFiles = tiers.docker.filter((f) => SWARM.test(f));
const dockerFiles = tiers.docker.filter((f) => !SWARM.test(f));

export default defineConfig({
  test: {
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default", "./test/support/tier-times.ts"],
    sequence: { sequencer: HeaviestFirst },
    projects: [
      tier("unit", tiers.unit),
      tier("docker", dockerFiles, [BUILD]),
      tier("api", tiers.api, [BUILD], 1),
      tier("docker-swarm", swarmFiles, [BUILD], 1),
    ],
  },
});
