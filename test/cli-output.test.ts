import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { BIN, type CliEnv, cliHome, newGitApp, svc } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { GIT_ENV } from "./support/git-fixture.ts";

/** Every command that prints a result has `--json`; mistakes and logged-out states say what to do next. */
describe("the CLI's results and errors (real binary, real API)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let env: CliEnv;
  let repo: string;
  const run = (args: string[], opts: { cwd?: string; input?: string; env?: CliEnv } = {}) =>
    svc(args, { cwd: opts.cwd ?? repo, env: { ...env, ...opts.env }, input: opts.input });
  const json = async (args: string[], opts: { cwd?: string; input?: string } = {}) => {
    const r = await run([...args, "--json"], opts);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    env = cliHome().env;
    repo = join(mkdtempSync(join(tmpdir(), "svc-out-")), "app");
    await newGitApp(repo);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("login, hosts, init, ship, secrets and env print JSON with --json", async () => {
    expect(await json(["hosts", "add", "mine", "--url", api.url])).toMatchObject({ name: "mine", url: api.url });
    expect(await json(["hosts", "use", "mine"])).toMatchObject({ name: "mine", active: true });
    expect(await json(["hosts", "current"])).toMatchObject({ name: "mine", logged_in: false });
    const login = await json(["login", "--token", user.token]);
    expect(login).toMatchObject({
      host: "mine",
      url: api.url,
      user: { email: expect.stringMatching(/@example.test$/) },
    });
    expect(JSON.stringify(login)).not.toContain(user.token);

    const init = await json(["init"]);
    expect(init.written).toEqual(expect.arrayContaining(["svc.toml", ".svc/Dockerfile"]));
    await execa("bash", ["-c", "git add -A && git commit -qm scaffold"], { cwd: repo, env: GIT_ENV });
    const ship = await json(["ship"]);
    const head = (await execa("git", ["rev-parse", "HEAD"], { cwd: repo })).stdout;
    expect(ship).toMatchObject({ branch: "main", commit: head, created: true, remote: "svc" });
    expect(await json(["ship"])).toMatchObject({ branch: "main", commit: head, created: false, change_request: null });
    await execa("bash", ["-c", "git commit -q --allow-empty -m later"], { cwd: repo, env: GIT_ENV });
    const later = await json(["ship"]);
    const laterHead = (await execa("git", ["rev-parse", "HEAD"], { cwd: repo })).stdout;
    expect(later).toMatchObject({
      project_id: ship.project_id,
      branch: `ship/${laterHead.slice(0, 12)}`,
      commit: laterHead,
      created: false,
      remote: "svc",
      change_request: { number: 1, title: "later", status: "open", base_ref: "main" },
    });
    const elsewhere = mkdtempSync(join(tmpdir(), "svc-out-link-"));
    const link = await json(["projects", "link", ship.project_id], { cwd: elsewhere });
    expect(link).toMatchObject({ project_id: ship.project_id, host: "mine", host_url: api.url });
    expect((await json(["projects", "open"], { cwd: elsewhere })).url).toMatch(`/projects/${ship.project_id}`);
    expect((await json(["projects", "unlink"], { cwd: elsewhere })).removed).toBe(link.path);

    expect(await json(["secrets", "set", "API_KEY=-", "REGION=eu"], { input: "s3cret\n" })).toEqual({
      names: ["API_KEY", "REGION"],
      revision: expect.any(Number),
    });
    expect((await json(["secrets", "unset", "REGION"])).removed).toEqual(["REGION"]);
    writeFileSync(join(repo, "local.env"), "export DB_URL='postgres://x'\nTOKEN=abc\n");
    expect((await json(["env", "push", "--from", "local.env"])).names).toEqual(["DB_URL", "TOKEN"]);
    const pulled = await json(["env", "pull", "--out", "skeleton.env"]);
    expect(pulled).toEqual({ out: "skeleton.env", names: ["API_KEY", "DB_URL", "TOKEN"] });
    expect(readFileSync(join(repo, "skeleton.env"), "utf8")).toBe("API_KEY=\nDB_URL=\nTOKEN=\n");

    const logout = await json(["logout"]);
    expect(logout).toEqual({ host: "mine", logged_out: true });
    expect(await json(["hosts", "rm", "mine", "--yes"])).toMatchObject({ removed: "mine" });
    expect(await json(["version"])).toEqual({ version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    // A flag a command does not have is refused, never ignored.
    const help = await run(["hosts", "current", "--yes"]);
    expect(help.code).toBe(2);
    expect(help.stderr).toContain("unknown option '--yes'");
  });

  it("a reader that closes early ends the output quietly, with SIGPIPE's status as `yes | true` has, nothing on stderr", async () => {
    const piped = await execa(
      "bash",
      [
        "-c",
        `"${process.execPath}" "${BIN}" self-host env ls 2>"$1" | true; echo "\${PIPESTATUS[0]}"`,
        "_",
        join(repo, "..", "err.txt"),
      ],
      { env: { ...process.env, ...env }, reject: false },
    );
    expect(readFileSync(join(repo, "..", "err.txt"), "utf8")).toBe("");
    expect(piped.stdout.trim()).toBe("141");
  });

  it("a mistyped command is an unknown command, and `sessions show` is `sessions info`", async () => {
    const typo = await run(["sesions", "ls"]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("unknown command 'sesions' (did you mean sessions?)");
    const nonsense = await run(["frobnicate", "ls"]);
    expect(nonsense.code).toBe(2);
    expect(nonsense.stderr).toContain("unknown command 'frobnicate'");
    for (const alias of ["show", "view"]) {
      const r = await run(["sessions", alias]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("missing required argument 'id'");
    }
  });

  it("after logout, says how to log in again; on a self-host, that `self-host start` does", async () => {
    await run(["login", "--api", api.url, "--host", "again", "--token", user.token]);
    const out = await run(["logout", "--host", "again"]);
    expect(out.stderr).toContain("to log in again, run 'svc login --host again'");
    const after = await run(["cr", "ls", "--host", "again"]);
    expect(after.code).toBe(1);
    expect(after.stderr).toContain("not logged in to again; run 'svc login --host again'");

    // A stored token the API no longer accepts: the 401 says how to log in again.
    const config = JSON.parse(readFileSync(env.SVC_CONFIG_FILE!, "utf8"));
    config.hosts.stale = { url: api.url, token: "svc_pat_revokedrevokedrevokedrevoked" };
    writeFileSync(env.SVC_CONFIG_FILE!, JSON.stringify(config));
    const stale = await run(["cr", "ls", "--host", "stale", "--project", "p"]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/\(UNAUTHENTICATED, HTTP 401\); to log in again, run 'svc login --host stale'/);

    const selfhost = await run(["cr", "ls", "--host", "selfhost"]);
    expect(selfhost.code).toBe(1);
    expect(selfhost.stderr).toContain(
      "not logged in to selfhost; run 'svc self-host start' (it logs in again as the stack's admin)",
    );
  });
});
