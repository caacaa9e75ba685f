import buildBundle from "./global-setup.ts";

const BUILT = Symbol.for("svc.test.bundle-built");

/**
 * The api and docker tiers' global setup: the CLI bundle built once per Vitest process, however many projects name
 * this file (each project runs its global setup files itself). The unit tier needs no bundle and names none.
 */
export default function buildOnce(): void {
  const state = globalThis as { [BUILT]?: boolean };
  if (state[BUILT]) return;
  state[BUILT] = true;
  buildBundle();
}
