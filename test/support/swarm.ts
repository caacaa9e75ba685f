import type Docker from "dockerode";
import { afterAll, beforeAll } from "vitest";
import { acquireSwarm, releaseSwarm, removeLabelled } from "../../scripts/harness/swarm.ts";
import { requireDocker } from "./docker.ts";

// Shared with the benchmarks (scripts/bench), which never import test/: the code lives in scripts/harness.
export * from "../../scripts/harness/swarm.ts";

/**
 * Call at the top of a test file: a swarm manager for its tests (the machine's engine), released after them. Each
 * label given to `cleanUp` has its services, networks and volumes removed after the file, before the release.
 */
export function useSwarm(): { docker: () => Docker; cleanUp: (label: string) => void } {
  let engine: Docker | undefined;
  const labels = new Set<string>();
  beforeAll(async () => {
    engine = await requireDocker();
    await acquireSwarm();
  });
  afterAll(async () => {
    try {
      if (engine) for (const label of labels) await removeLabelled(engine, label);
    } finally {
      if (engine) await releaseSwarm();
    }
  });
  return {
    docker: () => {
      if (!engine) throw new Error("useSwarm: the swarm is ready in tests and hooks, not at collection");
      return engine;
    },
    cleanUp: (label) => void labels.add(label),
  };
}
