import { spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { git } from "../../api/git/run.ts";

const FIXTURE_VERSION = 2;
export const HISTORY_COMMITS = 50_000;
const FILES = 3000;
const SIDE_COMMITS = 300;

export type HistoryFixture = { dir: string; commits: number; files: number };

/**
 * A bare repository with a long history built by `git fast-import` in seconds: 50,000 commits on main touching
 * a 3,000-file tree, then `base`, `head` (disjoint edits: merges cleanly) and `head-conflict` (edits base's files).
 * Cached in the temp dir by version.
 */
export async function historyFixture(): Promise<HistoryFixture> {
  const dir = join(tmpdir(), `svc-bench-history-v${FIXTURE_VERSION}.git`);
  if (existsSync(join(dir, "refs", "heads", "done")))
    return { dir, commits: HISTORY_COMMITS + SIDE_COMMITS * 3, files: FILES };
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await git(["init", "--bare", "-q", "--initial-branch=main", dir]);

  const importer = spawn("git", ["-C", dir, "fast-import", "--quiet"], { stdio: ["pipe", "inherit", "inherit"] });
  const done = new Promise<void>((resolve, reject) =>
    importer.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`fast-import exited ${code}`)))),
  );
  let buffer = "";
  const flush = async () => {
    if (!importer.stdin.write(buffer)) await new Promise((r) => importer.stdin.once("drain", r));
    buffer = "";
  };
  const data = (s: string) => `data ${Buffer.byteLength(s)}\n${s}\n`;
  let mark = 0;
  let time = 1_600_000_000;
  const commit = (ref: string, parent: number | undefined, message: string, changes: [string, string][]) => {
    mark += 1;
    time += 60;
    buffer += `commit ${ref}\nmark :${mark}\ncommitter Bench <bench@example.test> ${time} +0000\n${data(message)}`;
    if (parent) buffer += `from :${parent}\n`;
    for (const [path, content] of changes) buffer += `M 100644 inline ${path}\n${data(content)}`;
    return mark;
  };
  const file = (i: number) => `src/module-${Math.floor(i / 100)}/file-${i}.txt`;
  const body = (i: number, rev: string) => `file ${i}\n${"line of code\n".repeat(20)}revision ${rev}\n`;

  let tip = commit(
    "refs/heads/main",
    undefined,
    "initial tree",
    Array.from({ length: FILES }, (_, i) => [file(i), body(i, "0")]),
  );
  for (let n = 1; n < HISTORY_COMMITS; n++) {
    const i = (n * 7919) % FILES;
    tip = commit("refs/heads/main", tip, `change ${n}`, [[file(i), body(i, String(n))]]);
    if (buffer.length > 1 << 20) await flush();
  }
  const fork = tip;
  let base = fork;
  let head = fork;
  let conflict = fork;
  for (let n = 0; n < SIDE_COMMITS; n++) {
    base = commit("refs/heads/base", base, `base ${n}`, [[file(n), body(n, `base-${n}`)]]);
    head = commit("refs/heads/head", head, `head ${n}`, [[file(FILES - 1 - n), body(FILES - 1 - n, `head-${n}`)]]);
    conflict = commit("refs/heads/head-conflict", conflict, `conflict ${n}`, [[file(n), body(n, `other-${n}`)]]);
  }
  commit("refs/heads/done", fork, "fixture complete", []);
  await flush();
  importer.stdin.end();
  await done;
  return { dir, commits: HISTORY_COMMITS + SIDE_COMMITS * 3, files: FILES };
}
