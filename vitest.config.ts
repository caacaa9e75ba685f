import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { tierFiles } from "./test/support/tiers.ts";

// The tiers, file by file (test/support/tiers.ts): a test file in no tier fails here, before anything runs.
const tiers = tierFiles(fileURLToPath(new URL(".", import.meta.url)));
// The CLI bundle the api and docker tiers' tests spawn, built once per run; unit tests need none.
const BUILD = "test/support/build-once.ts";

/** A tier's worker count from the environment (SVC_TEST_API_WORKERS, SVC_TEST_DOCKER_WORKERS), else `fallback`. */
function workers(variable: string, fallback: number): number {
  const value = process.env[variable];
  if (value === undefined || value === "") return fallback;
  if (!/^[1-9][0-9]*$/.test(value)) throw new Error(`${variable} must be a whole number of workers, not '${value}'`);
  return Number(value);
}

// One file at a time in the api and docker tiers (README, "Test and measure", has the measurements): the api tier's
// files are CPU-bound, so a second worker on two cores gains nothing; two docker workers cut that tier by a third
// (644 s to 407 s) but made timing-sensitive files fail. Unit files take Vitest's default (cores - 1). Tiers with
// their own worker counts run one after another (sequence.groupOrder): unit, api, docker.
export default defineConfig({
  test: {
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default", "./test/support/tier-times.ts"],
    projects: [
      { extends: true, test: { name: "unit", include: tiers.unit, sequence: { groupOrder: 0 } } },
      {
        extends: true,
        test: {
          name: "api",
          include: tiers.api,
          globalSetup: [BUILD],
          maxWorkers: workers("SVC_TEST_API_WORKERS", 2),
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "docker",
          include: tiers.docker,
          globalSetup: [BUILD],
          maxWorkers: workers("SVC_TEST_DOCKER_WORKERS", 2),
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
