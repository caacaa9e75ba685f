// `npm run bench`: figures as ratios against baselines measured in the same run; exits 1 when a target is missed.
import postgres from "postgres";
import { benchCliStart } from "./cli-start.ts";
import { benchCrRead } from "./cr-read.ts";
import { benchDaemonProxy } from "./daemon-proxy.ts";
import { benchMergePreview } from "./merge-preview.ts";
import { benchPreviewAlone } from "./preview.ts";
import { benchSessionStart } from "./sandbox.ts";
import { benchSandboxClone } from "./sandbox-clone.ts";
import { benchSelfHostModes } from "./self-host-modes.ts";
import { benchCliSessions } from "./session-cli.ts";
import { benchSoak } from "./soak.ts";

const lines: string[] = [];
let ok = true;

// `npm run bench -- preview`: only the preview figure, with a sandbox of its own (seconds, not minutes).
if (process.argv[2] === "preview") {
  const preview = await benchPreviewAlone();
  console.log(`\n${preview.line}`);
  process.exit(preview.ok ? 0 : 1);
}

// `npm run bench -- soak`: only the 100-cycle session soak.
if (process.argv[2] === "soak") {
  const soak = await benchSoak();
  console.log(`\n${soak.lines.join("\n")}`);
  process.exit(soak.ok ? 0 : 1);
}

// `npm run bench -- clone`: only the sandbox clone figure (a repository with history, through the API).
if (process.argv[2] === "clone") {
  const clone = await benchSandboxClone();
  console.log(`\n${clone.line}`);
  process.exit(clone.ok ? 0 : 1);
}

// `npm run bench -- cli-sessions`: only `svc sessions new` against `docker run`, spaced and in a burst.
if (process.argv[2] === "cli-sessions") {
  const cliSessions = await benchCliSessions();
  console.log(`\n${cliSessions.lines.join("\n")}`);
  process.exit(cliSessions.ok ? 0 : 1);
}

// `npm run bench -- sessions`: only the session figures (create -> running, first answer, prompt -> CR, pool).
if (process.argv[2] === "sessions") {
  const sandbox = await benchSessionStart();
  console.log(`\n${sandbox.lines.join("\n")}`);
  process.exit(sandbox.ok ? 0 : 1);
}

const cli = benchCliStart();
lines.push(cli.line);
ok &&= cli.ok;

const mergePreview = await benchMergePreview();
lines.push(mergePreview.line);
ok &&= mergePreview.ok;

const clone = await benchSandboxClone();
lines.push(clone.line);
ok &&= clone.ok;

const pglite = await benchCrRead("pglite");
lines.push(pglite.line);
ok &&= pglite.ok;

const pgUrl = process.env.SVC_TEST_DATABASE_URL ?? "postgres://svc:svc@127.0.0.1:5432/svc";
const admin = postgres(pgUrl, { max: 1, onnotice: () => {} });
try {
  const name = `svc_bench_${process.pid}`;
  await admin.unsafe(`create database ${name}`);
  try {
    const url = new URL(pgUrl);
    url.pathname = `/${name}`;
    const pg = await benchCrRead("postgres", url.toString());
    lines.push(pg.line);
    ok &&= pg.ok;
  } finally {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
  }
} catch (err) {
  lines.push(`CR read (postgres): skipped, no server at ${pgUrl} (${(err as Error).message})`);
} finally {
  await admin.end();
}

const proxy = await benchDaemonProxy();
lines.push(...proxy.lines);
ok &&= proxy.ok;

if (process.env.SVC_BENCH_SKIP_DOCKER !== "1") {
  const sandbox = await benchSessionStart();
  lines.push(...sandbox.lines);
  ok &&= sandbox.ok;
  const cliSessions = await benchCliSessions();
  lines.push(...cliSessions.lines);
  ok &&= cliSessions.ok;
  const soak = await benchSoak();
  lines.push(...soak.lines);
  ok &&= soak.ok;
  const preview = await benchPreviewAlone();
  lines.push(preview.line);
  ok &&= preview.ok;
  lines.push(...(await benchSelfHostModes({ cold: false })));
}

console.log(`\n${lines.join("\n")}`);
process.exit(ok ? 0 : 1);
