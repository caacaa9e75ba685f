// Shared with the benchmarks (scripts/bench), which never import test/: the code lives in scripts/harness.
export * from "../../scripts/harness/warm-pool.ts";
