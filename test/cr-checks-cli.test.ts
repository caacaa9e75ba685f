import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckRunList } from "../protocol/cr-check.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { CHECKS_MANIFEST, seededChecks } from "./support/check-runs.ts";
import { BIN, type CliEnv, cliHome, svc, svcTty } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";

/** 30 lines: the CLI prints the last 20 of them. */
const LINT_LOG = `${Array.from({ length: 30 }, (_, i) => `lint line ${i + 1}`).join("\n")}\n`;
/** Long enough for a waiting CLI to have read the checks more than once (it reads every second). */
const WHILE_IT_WAITS_MS = 3000;

/**
 * DESIGN "The review loop on a CR": `svc cr checks [--json] [--wait]` and `svc cr merge --auto | --cancel-auto`, the
 * real CLI against the real API on PGlite. The API runs no check scheduler: the runs are written through the
 * scheduler's own store (queued, taken, finished) when the test says, and no merge queue merges anything.
 */
describe("svc cr checks and svc cr merge --auto (real CLI and API, seeded check runs)", () => {
  const home = cliHome();
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  let work: WorkRepo;
  let env: CliEnv;
  let checks: ReturnType<typeof seededChecks>;

  const cli = (args: string[], extra: CliEnv = {}) =>
    svc([...args, "--project", projectId], { env: { ...env, ...extra } });
  const checksOf = async (n: number) =>
    CheckRunList.parse(
      (await call(api.url, "GET", `/v1/projects/${projectId}/change-requests/${n}/checks`, { token: user.token })).body,
    );

  /** A CR from a new branch off main, with one commit: its checks are `pending` until the test queues and runs them. */
  async function openCr(branch: string): Promise<number> {
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(branch, { create: true, from: "origin/main" });
    await work.commit(`work on ${branch}`, { [`${branch}.txt`]: `${branch}\n` });
    await work.pushed(branch);
    const opened = await call(api.url, "POST", `/v1/projects/${projectId}/change-requests`, {
      token: user.token,
      body: { title: `CR ${branch}`, head_ref: branch },
    });
    expect(opened.status, JSON.stringify(opened.body)).toBe(201);
    return opened.body.number;
  }

  /** A CR whose unit check passed in 4 s and whose lint failed with exit 2 after 65 s. */
  async function redCr(branch: string): Promise<number> {
    const n = await openCr(branch);
    await checks.queue(n, "unit", "lint");
    const { unit, lint } = await checks.start();
    await checks.finish(unit!, "passed", 0, "all good\n", 4);
    await checks.finish(lint!, "failed", 2, LINT_LOG, 65);
    return n;
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Checked" } });
    projectId = created.body.id;
    env = { ...home.env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: user.token };
    checks = seededChecks(api.services.sql, api.url, user.token, projectId);
    work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
    // Landed before any CR: from here on, every merge needs these checks passed.
    await work.commit("checks", { "svc.toml": CHECKS_MANIFEST });
    await landOnDefault(api.url, user.token, projectId, work, "add checks");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("prints each check's status, exit and duration, and the failed one's log tail; exit 1 names it", async () => {
    const n = await redCr("red");
    const out = await cli(["cr", "checks", String(n)]);
    expect(out.code, out.stderr).toBe(1);
    expect(out.stderr).toContain(`error: CR #${n}: check 'lint' failed`);
    const [table, tail] = out.stdout.split("\n\n");
    expect(table).toBe("unit\tpassed\t0\t4s\nlint\tfailed\t2\t1m05s");
    const tailLines = tail!.split("\n");
    expect(tailLines[0]).toBe("lint failed (exit 2); the last 20 of its 30 lines:");
    expect(tailLines.slice(1)).toEqual(Array.from({ length: 20 }, (_, i) => `lint line ${i + 11}`));

    // --json is the API's answer as it is; the exit code still says the checks failed.
    const json = await cli(["cr", "checks", `#${n}`, "--json"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual(await checksOf(n));
    expect(JSON.parse(json.stdout).map((r: { name: string; status: string }) => [r.name, r.status])).toEqual([
      ["unit", "passed"],
      ["lint", "failed"],
    ]);

    // At a terminal, the table has its header.
    const tty = await svcTty(["cr", "checks", String(n), "--project", projectId], { env });
    expect(tty.code).toBe(1);
    expect(tty.output).toMatch(/NAME +STATUS +EXIT +DURATION\r?\nunit +passed +0 +4s\r?\nlint +failed +2 +1m05s/);
  });

  it("a plain merge of a CR whose checks failed is refused with 409 CHECKS_NOT_PASSED, in words", async () => {
    const n = await redCr("refused");
    const merge = await cli(["cr", "merge", String(n)]);
    expect(merge.code).toBe(1);
    expect(merge.stderr).toMatch(/cannot merge until its checks pass on head [0-9a-f]{12}: lint \(failed\)/);
    expect(merge.stderr).toContain(`svc cr merge ${n} --auto`);
    expect(merge.stderr).toContain("(CHECKS_NOT_PASSED, HTTP 409)");
    expect((await checks.crOf(n)).status).toBe("open");

    // show and ls say where the checks stand; --json gains the fields and keeps its shape.
    const show = await cli(["cr", "show", String(n)]);
    expect(show.stdout).toContain(`checks:   failed (svc cr checks ${n})`);
    const shown = JSON.parse((await cli(["cr", "show", String(n), "--json"])).stdout);
    expect(Object.keys(shown)).toEqual(["change_request", "merge_preview"]);
    expect(shown.change_request).toMatchObject({ checks_status: "failed", mergeable: false, auto_merge: false });
    const ls = await cli(["cr", "ls"]);
    expect(ls.stdout.split("\n")).toContain(`#${n}\topen\trefused -> main\tCR refused\tfailed`);
  });

  it("--wait follows queued and running checks until none is left, then exits as they ended", async () => {
    const n = await openCr("waited");
    await checks.queue(n, "unit");
    const { unit } = await checks.start();
    await checks.queue(n, "lint");

    // Without --wait: the checks as they stand, and exit 1: they have not passed.
    const now = await cli(["cr", "checks", String(n)]);
    expect(now.code).toBe(1);
    expect(now.stdout).toMatch(/^unit\trunning\t-\t\d+s\nlint\tqueued\t-\t-$/);
    expect(now.stderr).toContain(`CR #${n}: checks 'unit', 'lint' have not finished (--wait waits for them)`);

    let done = false;
    const waiting = cli(["cr", "checks", String(n), "--wait"]).finally(() => {
      done = true;
    });
    await new Promise((r) => setTimeout(r, WHILE_IT_WAITS_MS));
    expect(done).toBe(false);
    await checks.finish(unit!, "passed", 0, "fine\n");
    const { lint } = await checks.start();
    await new Promise((r) => setTimeout(r, WHILE_IT_WAITS_MS));
    expect(done).toBe(false);
    await checks.finish(lint!, "failed", 1, "lint: 3 problems\n");
    const out = await waiting;
    expect(out.code).toBe(1);
    expect(out.stdout).toContain("unit\tpassed\t0\t");
    expect(out.stdout).toContain("lint\tfailed\t1\t");
    expect(out.stdout).toContain("lint failed (exit 1); its log:\nlint: 3 problems");
    expect(out.stderr).toContain(`error: CR #${n}: check 'lint' failed`);
  });

  it("--wait on a head whose checks are not queued yet waits for them to be queued and run; all passed is exit 0", async () => {
    const n = await openCr("fresh");
    expect(await checksOf(n)).toEqual([]);
    expect((await checks.crOf(n)).checks_status).toBe("pending");
    const now = await cli(["cr", "checks", String(n)]);
    expect(now.code).toBe(1);
    expect(now.stderr).toContain("no checks have run on");
    expect(now.stderr).toContain("the checks of its head are not queued yet");

    let done = false;
    const waiting = cli(["cr", "checks", String(n), "--wait", "--json"]).finally(() => {
      done = true;
    });
    await new Promise((r) => setTimeout(r, WHILE_IT_WAITS_MS));
    expect(done).toBe(false);
    await checks.queue(n, "unit", "lint");
    const { unit, lint } = await checks.start();
    await checks.finish(unit!, "passed", 0, "ok\n");
    await checks.finish(lint!, "passed", 0, "ok\n");
    const out = await waiting;
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).not.toContain("error");
    expect(JSON.parse(out.stdout)).toEqual(await checksOf(n));
    expect(JSON.parse(out.stdout).map((r: { status: string }) => r.status)).toEqual(["passed", "passed"]);
    // Passed: no error, and ls and show say so.
    const table = await cli(["cr", "checks", String(n)]);
    expect(table.code, table.stderr).toBe(0);
    expect((await cli(["cr", "ls"])).stdout.split("\n")).toContain(`#${n}\topen\tfresh -> main\tCR fresh\tpassed`);
  });

  it("Ctrl-C stops the wait: the checks as they stand, and exit 1", async () => {
    const n = await openCr("interrupted");
    await checks.queue(n, "unit", "lint");
    await checks.start();
    const child = execa(process.execPath, [BIN, "cr", "checks", String(n), "--wait", "--project", projectId], {
      env,
      reject: false,
    });
    await new Promise((r) => setTimeout(r, WHILE_IT_WAITS_MS));
    child.kill("SIGINT");
    const out = await child;
    expect(out.exitCode).toBe(1);
    expect(out.stderr).toContain("stopped waiting");
    expect(out.stderr).toContain("have not finished");
    expect(out.stdout).toMatch(/^unit\trunning\t/m);
  });

  it("svc cr merge --auto queues the CR (202), --cancel-auto takes it out; both in words or as the CR's JSON", async () => {
    const n = await openCr("queued");
    const queued = await cli(["cr", "merge", String(n), "--auto"]);
    expect(queued.code, queued.stderr).toBe(0);
    expect(queued.stderr).toContain(`✓ CR #${n} will merge when its checks pass`);
    expect(queued.stderr).not.toContain("warning");
    expect(queued.stdout).toBe("");
    expect(await checks.crOf(n)).toMatchObject({ status: "open", auto_merge: true, checks_status: "pending" });
    expect((await cli(["cr", "show", String(n)])).stdout).toContain("auto:     merges by itself once its checks pass");
    expect((await cli(["cr", "ls"])).stdout.split("\n")).toContain(
      `#${n}\topen\tqueued -> main\tCR queued\tpending, auto-merge`,
    );

    const cancelled = await cli(["cr", "merge", String(n), "--cancel-auto", "--json"]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ number: n, auto_merge: false, status: "open" });
    expect((await checks.crOf(n)).auto_merge).toBe(false);
    const again = await cli(["cr", "merge", String(n), "--auto", "--json"]);
    expect(JSON.parse(again.stdout)).toMatchObject({ number: n, auto_merge: true });

    // A CR whose checks failed is queued too, with a warning: the queue lets it go at its next step.
    const red = await redCr("queued-red");
    const warned = await cli(["cr", "merge", String(red), "--auto"]);
    expect(warned.code).toBe(0);
    expect(warned.stderr).toContain("warning: its checks failed on the current head");
    // A closed CR is not queued.
    expect((await cli(["cr", "close", String(red)])).code).toBe(0);
    const closed = await cli(["cr", "merge", String(red), "--auto"]);
    expect(closed.code).toBe(1);
    expect(closed.stderr).toContain("(CR_NOT_OPEN, HTTP 409)");
  });

  it("--auto with --message or --match-head-commit, or with --cancel-auto, is a usage error before any request", async () => {
    // An API that is not there: a request would fail with exit 1, not 2.
    const nowhere = { SVC_API_URL: "http://127.0.0.1:9/v1" };
    const reached = await cli(["cr", "merge", "1", "--auto"], nowhere);
    expect(reached.code).toBe(1);
    expect(reached.stderr).toContain("cannot reach");
    for (const [flags, named] of [
      [["--auto", "--message", "hi"], "--message"],
      [["--auto", "--match-head-commit", "a".repeat(40)], "--match-head-commit"],
      [["--cancel-auto", "--message", "hi"], "--message"],
      [["--auto", "--cancel-auto"], "--auto"],
    ] as const) {
      const out = await cli(["cr", "merge", "1", ...flags], nowhere);
      expect(out.code, flags.join(" ")).toBe(2);
      expect(out.stderr).toContain("cannot be used with");
      expect(out.stderr).toContain(named);
      expect(out.stderr).not.toContain("cannot reach");
    }
  });
});
