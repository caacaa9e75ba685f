import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, watch } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { call } from "./support/api-server.ts";
import { freePort } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { gitIn, rootCommit, writeBranches } from "./support/merge-history.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** SIGKILLs in all; each lands at a random instant while merges and CR creations are under way. */
const KILLS = 50;
/** API processes on the one database and data directory: one is killed while the others serve. */
const REPLICAS = 3;
/** Open CRs the test keeps in flight: each round merges all of them (some twice, on two processes) at once. */
const IN_FLIGHT = 10;
/** The random instant of a kill: up to this long after the round's requests left. */
const KILL_WINDOW_MS = 400;
/** How often a round kills every process at once, the instant main moves, rather than one at a random instant. */
const WHOLE_STACK_KILLS = 0.3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Replica = { port: number; child?: ChildProcess; up?: Promise<void>; ready: boolean; lines: string[] };
type CrRow = {
  number: number;
  cr_id: string;
  head_ref: string;
  status: string;
  merge_commit_sha: string | null;
  head_commit_sha: string | null;
  base_commit_sha: string | null;
  merged_by: string | null;
};

/**
 * What the CR records say against main's history: each commit on main's first-parent chain brought exactly one CR's
 * branch in (the branch's commit, fast-forwarded, or a merge of it), and that CR, and only it, is merged with exactly
 * that commit, its base and head. Returns one line per CR or commit that disagrees.
 */
async function audit(bare: string, rows: CrRow[], tips: Map<string, string>, mergedBy: string) {
  const chain = (await gitIn(bare)(["rev-list", "--first-parent", "--parents", "main"]))
    .split("\n")
    .map((line) => line.split(" "));
  const landing = new Map<string, { commit: string; base: string }>();
  for (const [commit, first, second] of chain) {
    if (first) landing.set(second ?? commit!, { commit: commit!, base: first });
  }
  const problems: string[] = [];
  const recorded = new Set<string>();
  for (const cr of rows) {
    const tip = tips.get(cr.head_ref);
    const landed = tip ? landing.get(tip) : undefined;
    if (cr.status !== "merged") {
      if (landed) problems.push(`#${cr.number} is ${cr.status} but main took it in as ${landed.commit}`);
      continue;
    }
    recorded.add(cr.merge_commit_sha ?? "");
    if (!landed) problems.push(`#${cr.number} is merged but its head ${tip} is not on main`);
    else if (cr.merge_commit_sha !== landed.commit)
      problems.push(`#${cr.number} is merged as ${cr.merge_commit_sha}, main took it in as ${landed.commit}`);
    else {
      const wrong = [
        ["head", cr.head_commit_sha, tip],
        ["base", cr.base_commit_sha, landed.base],
        ["merger", cr.merged_by, mergedBy],
      ].filter(([, got, want]) => got !== want);
      if (wrong.length > 0) {
        const said = wrong.map(([field, got, want]) => `${field} ${got} where main says ${want}`).join(", ");
        problems.push(`#${cr.number} has the wrong ${said}`);
      }
    }
  }
  for (const [commit, first] of chain) {
    if (first && !recorded.has(commit!)) problems.push(`main's ${commit} is no CR's merge commit`);
  }
  return { problems, mainCommits: chain.length - 1 };
}

/** A small seeded generator: a failing run can be replayed with SVC_TEST_SEED. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("merges and CR creation under SIGKILL of the API (real processes, PostgreSQL)", () => {
  let db: TestDatabase | undefined;
  let home: string | undefined;
  const replicas: Replica[] = [];

  afterAll(async () => {
    for (const r of replicas) r.child?.kill("SIGKILL");
    await db?.drop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it(`settles every interrupted merge: ${KILLS} kills, the record always matches the base branch`, async () => {
    const seed = Number(process.env.SVC_TEST_SEED ?? Date.now() % 1_000_000);
    const rand = random(seed);
    db = await freshDatabase("postgres");
    const sql = db.sql;
    home = mkdtempSync(join(tmpdir(), "svc-merge-crash-"));
    const adminToken = newSecret("svc_pat_");
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("SVC_") && k !== "DATABASE_URL"),
    );

    async function start(r: Replica): Promise<void> {
      // The bundle `svc self-host start` runs (built once per test run): it starts in half the time tsx takes.
      const child = spawn(process.execPath, ["dist/api.mjs"], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "inherit"],
        env: {
          ...inherited,
          SVC_HOME: home!,
          SVC_PORT: String(r.port),
          DATABASE_URL: db!.url!,
          SVC_ORCHESTRATOR: "off",
          SVC_LOG_LEVEL: "warn",
          SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(adminToken),
        },
      });
      r.child = child;
      let partial = "";
      child.stdout!.on("data", (chunk: Buffer) => {
        const text = partial + chunk.toString();
        const lines = text.split("\n");
        partial = lines.pop()!;
        r.lines.push(...lines);
      });
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the API exited (${child.exitCode})`);
        const up = await fetch(`http://127.0.0.1:${r.port}/v1/health`).then(
          (res) => res.ok,
          () => false,
        );
        if (up) {
          r.ready = true;
          return;
        }
        await sleep(25);
      }
      throw new Error("the API did not become healthy");
    }
    const isUp = (r: Replica) => r.ready;

    for (let i = 0; i < REPLICAS; i++) replicas.push({ port: await freePort(), ready: false, lines: [] });
    await Promise.all(replicas.map((r) => (r.up = start(r))));
    const url = (r: Replica) => `http://127.0.0.1:${r.port}`;

    const created = await call(url(replicas[0]!), "POST", "/v1/projects", {
      token: adminToken,
      body: { name: "Crash merges" },
    });
    expect(created.status).toBe(201);
    const projectId: string = created.body.id;
    const [admin] = await sql.query<{ id: string }>("select user_id as id from tokens where token_hash = $1", [
      hashSecret(adminToken),
    ]);
    const bare = join(home, "data", "repos", `${projectId}.git`);
    const g = gitIn(bare);
    const crsPath = `/v1/projects/${projectId}/change-requests`;
    await rootCommit(bare);

    /** Branch name -> its one commit, on top of main as it was (fast-forwards) or an older main (three-way). */
    const tips = new Map<string, string>();
    let branchCount = 0;
    async function makeBranches(n: number): Promise<string[]> {
      if (n <= 0) return [];
      const chain = (await g(["rev-list", "--first-parent", "-n", "6", "main"])).split("\n");
      const specs = Array.from({ length: n }, () => {
        branchCount += 1;
        // Half on main's tip (a fast-forward while main stays), half on an older main (a three-way merge).
        const from = rand() < 0.5 ? chain[0]! : chain[Math.floor(rand() * chain.length)]!;
        return { name: `topic-${branchCount}`, from };
      });
      for (const [name, sha] of await writeBranches(bare, specs)) tips.set(name, sha);
      return specs.map((s) => s.name);
    }

    const crRows = () =>
      sql.query<CrRow>(
        `select number, cr_id, head_ref, status, merge_commit_sha, head_commit_sha, base_commit_sha, merged_by
           from change_requests where project_id = $1 order by number`,
        [projectId],
      );
    const tally = {
      kills: 0,
      wholeStackKills: 0,
      rounds: 0,
      mergeRequests: 0,
      merged200: 0,
      createRequests: 0,
      created201: 0,
      failed: 0,
    };

    /**
     * One round: every open CR merged (some on two processes at once) and every branch without a CR opened, all at
     * once; new branches for the next round (an API reads branch tips at most once a second).
     */
    async function round(kill: boolean): Promise<void> {
      tally.rounds += 1;
      const live = replicas.filter(isUp);
      const pick = () => live[Math.floor(rand() * live.length)]!;
      const rows = await crRows();
      const withCr = new Set(rows.map((r) => r.head_ref));
      const open = rows.filter((r) => r.status === "open");
      const waiting = [...tips.keys()].filter((name) => !withCr.has(name));
      if (kill) await makeBranches(IN_FLIGHT - open.length - waiting.length);
      const requests: Promise<unknown>[] = [];
      const send = (r: Replica, path: string, body: unknown, ok: number, counter: "merged200" | "created201") =>
        requests.push(
          call(url(r), "POST", path, { token: adminToken, body }).then(
            (res) => {
              if (res.status === ok) tally[counter] += 1;
            },
            () => {
              tally.failed += 1;
            },
          ),
        );
      for (const name of waiting) {
        tally.createRequests += 1;
        send(pick(), crsPath, { title: `Work ${name}`, head_ref: name }, 201, "created201");
      }
      for (const cr of open) {
        tally.mergeRequests += 1;
        send(pick(), `${crsPath}/${cr.cr_id}/merge`, {}, 200, "merged200");
        if (rand() < 0.3) {
          tally.mergeRequests += 1;
          send(pick(), `${crsPath}/${cr.cr_id}/merge`, {}, 200, "merged200");
        }
      }
      if (kill && live.length >= 2) {
        // Mostly one process at a random instant; sometimes the whole stack the instant main moves, which is when a
        // merge has moved the branch and not yet recorded it (the process that moved it is among those killed).
        const whole = rand() < WHOLE_STACK_KILLS;
        await (whole ? mainMoves(KILL_WINDOW_MS) : sleep(rand() * KILL_WINDOW_MS));
        const victims = whole ? live : [pick()];
        for (const victim of victims) {
          victim.ready = false;
          victim.child!.kill("SIGKILL");
        }
        tally.kills += victims.length;
        if (whole) tally.wholeStackKills += 1;
        await Promise.all(victims.map((v) => new Promise((resolve) => v.child!.once("exit", resolve))));
        for (const victim of victims) victim.up = start(victim);
      }
      await Promise.all(requests);
    }

    /** Resolves the instant main's ref file is written (or after `ms`). */
    function mainMoves(ms: number): Promise<void> {
      return new Promise((resolve) => {
        const done = () => {
          watcher.close();
          clearTimeout(timer);
          resolve();
        };
        const watcher = watch(join(bare, "refs", "heads"), (_event, name) => {
          if (name === "main") done();
        });
        const timer = setTimeout(done, ms);
      });
    }

    const began = Date.now();
    while (tally.kills < KILLS) {
      // Rounds with a kill run with two processes up at least: one killed alone leaves another to serve.
      while (replicas.filter(isUp).length < 2) await Promise.race(replicas.filter((r) => !isUp(r)).map((r) => r.up));
      await round(true);
    }
    // Every process back (each start settles what the killed ones left), then the remaining work, without kills.
    await Promise.all(replicas.map((r) => r.up));
    const unsettled = async () => {
      const rows = await crRows();
      return rows.length < tips.size || rows.some((r) => r.status === "open");
    };
    for (let i = 0; i < 10 && (await unsettled()); i++) await round(false);
    for (const r of replicas) {
      const exited = new Promise((resolve) => r.child!.once("exit", resolve));
      r.child!.kill("SIGTERM");
      await exited;
    }

    // The record against the repository.
    const rows = await crRows();
    const { problems, mainCommits } = await audit(bare, rows, tips, admin!.id);
    const numbers = rows.map((r) => r.number);
    const heads = new Set(rows.map((r) => r.head_ref));
    const intents = await sql.query<{ n: number }>("select count(*)::int as n from cr_merge_intents").then(
      (r) => r[0]!.n,
      (err: Error) => `unreadable: ${err.message}`,
    );
    const repairs = replicas.flatMap((r) => r.lines).filter((l) => l.includes("interrupted merge"));
    const summary = {
      seed,
      seconds: Math.round((Date.now() - began) / 1000),
      ...tally,
      crs: rows.length,
      merged: rows.filter((r) => r.status === "merged").length,
      open: rows.filter((r) => r.status === "open").length,
      mainCommits,
      inconsistencies: problems.length,
      crsMisrecorded: new Set(problems.map((p) => /^#(\d+)/.exec(p)?.[1]).filter(Boolean)).size,
      intentsLeft: intents,
      repairRecorded: repairs.filter((l) => l.includes("recorded")).length,
      repairDropped: repairs.filter((l) => l.includes("dropped")).length,
    };
    console.log(`merge-crash: ${JSON.stringify(summary)}`);
    expect(problems).toEqual([]);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
    expect(heads.size).toBe(rows.length);
    expect(summary.open).toBe(0);
    expect(intents).toBe(0);
    expect(tally.kills).toBeGreaterThanOrEqual(KILLS);
  }, 300_000);
});
