// `npm run bench`: figures as ratios against baselines measured in the same run; exits 1 when a target is missed.
import postgres from "postgres";
import { benchChecks } from "./checks.ts";
import { benchCliStart } from "./cli-start.ts";
import { benchCrRead } from "./cr-read.ts";
import { benchDaemonProxy } from "./daemon-proxy.ts";
import { benchLink } from "./link.ts";
import { benchMergePreview } from "./merge-preview.ts";
import { benchPreviewAlone } from "./preview.ts";
import { benchResume } from "./resume.ts";
import { benchSessionStart } from "./sandbox.ts";
import { benchSandboxClone } from "./sandbox-clone.ts";
import { benchSelfHostModes } from "./self-host-modes.ts";
import { benchCliSessions } from "./session-cli.ts";
import { benchSoak } from "./soak.ts";
import { benchSpawn } from "./spawn.ts";
import { benchSwarmStart } from "./swarm-start.ts";
import { benchTranscriptRead } from "./transcript.ts";

/** A benchmark's outcome: whether its targets held, and its figure lines. */
type Figures = { ok: boolean; line?: string; lines?: string[] };
const linesOf = (f: Figures) => f.lines ?? (f.line ? [f.line] : []);

// `npm run bench -- <name>`: one figure alone, with a stack of its own (seconds or minutes, not the whole run).
const ALONE: Record<string, () => Promise<Figures>> = {
  preview: benchPreviewAlone,
  soak: () => benchSoak(),
  clone: benchSandboxClone,
  "cli-sessions": benchCliSessions,
  sessions: benchSessionStart,
  resume: benchResume,
  checks: benchChecks,
  link: benchLink,
  swarm: benchSwarmStart,
  spawn: benchSpawn,
  transcript: async () => {
    const figures = [await benchTranscriptRead("pglite"), await benchTranscriptRead("postgres")];
    return { ok: figures.every((f) => f.ok), lines: figures.map((f) => f.line) };
  },
};
const alone = ALONE[process.argv[2] ?? ""];
if (alone) {
  const figures = await alone();
  console.log(`\n${linesOf(figures).join("\n")}`);
  process.exit(figures.ok ? 0 : 1);
}

const lines: string[] = [];
let ok = true;
const record = (figures: Figures) => {
  lines.push(...linesOf(figures));
  ok &&= figures.ok;
};

record(benchCliStart());

record(await benchSpawn());

record(await benchMergePreview());

record(await benchSandboxClone());

record(await benchCrRead("pglite"));

record(await benchTranscriptRead("pglite"));
record(await benchTranscriptRead("postgres"));

const pgUrl = process.env.SVC_TEST_DATABASE_URL ?? "postgres://svc:svc@127.0.0.1:5432/svc";
const admin = postgres(pgUrl, { max: 1, onnotice: () => {} });
try {
  const name = `svc_bench_${process.pid}`;
  await admin.unsafe(`create database ${name}`);
  try {
    const url = new URL(pgUrl);
    url.pathname = `/${name}`;
    record(await benchCrRead("postgres", url.toString()));
  } finally {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
  }
} catch (err) {
  lines.push(`CR read (postgres): skipped, no server at ${pgUrl} (${(err as Error).message})`);
} finally {
  await admin.end();
}

record(await benchDaemonProxy());

if (process.env.SVC_BENCH_SKIP_DOCKER !== "1") {
  record(await benchSessionStart());
  record(await benchCliSessions());
  record(await benchSoak());
  record(await benchPreviewAlone());
  record(await benchResume());
  lines.push(...(await benchSelfHostModes({ cold: false })));
}

console.log(`\n${lines.join("\n")}`);
process.exit(ok ? 0 : 1);
