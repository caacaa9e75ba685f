import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { GIT_ENV } from "./support/git-fixture.ts";

describe("the svc CLI against a real API: login, hosts, projects, init, ship and cr", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let env: CliEnv;
  let repoDir: string;
  let projectId: string;

  const sh = (cwd: string, cmd: string) => execa("bash", ["-c", cmd], { cwd, env: GIT_ENV });
  const run = (args: string[], opts: { cwd?: string; env?: CliEnv } = {}) =>
    svc(args, { cwd: opts.cwd ?? repoDir, env: { ...env, ...opts.env } });

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    env = cliHome().env;
    repoDir = join(mkdtempSync(join(tmpdir(), "svc-cli-")), "my app");
    mkdirSync(repoDir);
    await sh(repoDir, "git init -q -b main && echo hello > README.md && git add -A && git commit -qm init");
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("logs in with --token, stores it at mode 0600 and answers whoami", async () => {
    const bad = await run(["login", "--token", "svc_pat_nope", "--api", api.url, "--host", "mine"]);
    expect(bad.code).toBe(1);
    const login = await run(["login", "--token", user.token, "--api", api.url, "--host", "mine"]);
    expect(login.code, login.stderr).toBe(0);
    expect(statSync(env.SVC_CONFIG_FILE!).mode & 0o777).toBe(0o600);
    const who = await run(["whoami", "--json"]);
    expect(JSON.parse(who.stdout).user.id).toBe(user.userId);
    expect((await run(["hosts", "current"])).stdout.trim()).toBe("mine");
  });

  it("manages hosts: ls, add, use, info, rm, and --host for one command", async () => {
    expect((await run(["hosts", "add", "other", "--url", "http://127.0.0.1:9/"])).code).toBe(0);
    const list = JSON.parse((await run(["hosts", "ls", "--json"])).stdout);
    expect(list.find((h: { name: string }) => h.name === "mine")).toMatchObject({ active: true, logged_in: true });
    expect(list.find((h: { name: string }) => h.name === "other")).toMatchObject({
      url: "http://127.0.0.1:9",
      logged_in: false,
    });
    expect((await run(["whoami", "--host", "other"])).code).toBe(1);
    expect((await run(["hosts", "use", "nope"])).code).toBe(1);
    expect((await run(["hosts", "add", "Bad Name", "--url", "http://x"])).code).toBe(2);
    expect((await run(["hosts", "add", "x", "--url", "not a url"])).code).toBe(2);
    expect((await run(["hosts", "rm", "other"])).code).toBe(0);
    expect((await run(["hosts", "info", "mine", "--json"])).stdout).toContain('"active": true');
  });

  it("scaffolds with init without linking, then ship creates a managed project, pushes and links", async () => {
    const init = await run(["init"]);
    expect(init.code, init.stderr).toBe(0);
    for (const f of [
      "svc.toml",
      ".svc/Dockerfile",
      ".svc/agent/opencode.json",
      ".svc/agent/skill/svc-change-requests/SKILL.md",
    ]) {
      expect(existsSync(join(repoDir, f)), f).toBe(true);
    }
    expect(existsSync(join(repoDir, ".svc/link.json"))).toBe(false);
    await sh(repoDir, "git add -A && git commit -qm scaffold");

    const ship = await run(["ship"]);
    expect(ship.code, ship.stderr).toBe(0);
    projectId = ship.stdout.trim();
    const link = JSON.parse(readFileSync(join(repoDir, ".svc/link.json"), "utf8"));
    expect(link).toMatchObject({ project_id: projectId, host: "mine", host_url: api.url });
    // The link is this checkout's own: git ignores it, so `git add -A` never ships it to the sandbox.
    expect((await sh(repoDir, "git status --porcelain")).stdout.trim()).toBe("");
    const bare = api.services.repos.managedDir(projectId);
    const local = (await sh(repoDir, "git rev-parse HEAD")).stdout.trim();
    expect((await git(["rev-parse", "main"], { dir: bare })).stdout.trim()).toBe(local);
    expect(readFileSync(join(repoDir, ".git/config"), "utf8")).not.toContain("svc_pat_");

    const projects = JSON.parse((await run(["projects", "ls", "--json"])).stdout);
    expect(projects.filter((p: { id: string }) => p.id === projectId)).toHaveLength(1);
  });

  it("opens, lists, shows, diffs and merges a CR; numbers accept 3, #3 and ids", async () => {
    await sh(repoDir, "git checkout -qb feature && echo feature > feature.txt && git add -A && git commit -qm feature");
    // Not pushed yet: `cr open` cannot take the current branch as the head.
    expect((await run(["cr", "open", "--title", "Nope"])).code).toBe(2);
    expect((await run(["ship"])).code).toBe(0);
    const opened = await run([
      "cr",
      "new",
      "--title",
      "Add feature",
      "--from",
      "feature",
      "--body",
      "why",
      "--into",
      "main",
    ]);
    expect(opened.code, opened.stderr).toBe(0);
    expect(opened.stdout.trim()).toBe("#1");
    const ls = await run(["cr", "ls"]);
    expect(ls.stdout.trim()).toBe("#1\topen\tfeature -> main\tAdd feature\t-");
    const show = await run(["cr", "show", "#1"]);
    expect(show.stdout).toContain("preview:  clean, fast-forward");
    const json = JSON.parse((await run(["cr", "info", "1", "--json"])).stdout);
    expect(json.change_request).toMatchObject({ number: 1, description: "why", head_ref: "feature" });
    expect(json.merge_preview.can_fast_forward).toBe(true);
    const diff = await run(["cr", "diff", json.change_request.cr_id]);
    expect(diff.stdout).toContain("+feature");
    expect(diff.stdout).not.toContain("\x1b[");
    expect((await run(["cr", "show", "abc"])).code).toBe(2);
    expect((await run(["cr", "show", "99"])).code).toBe(1);

    // Only the head named (or, by default, the one `cr merge` reads) lands: another is 409 HEAD_MOVED, nothing merges.
    const head = json.change_request.head_commit_sha as string;
    const seen = (await sh(repoDir, "git rev-parse main")).stdout.trim();
    const moved = await run(["cr", "merge", "1", "--match-head-commit", seen]);
    expect(moved.code).toBe(1);
    expect(moved.stderr).toMatch(/moved to [0-9a-f]{12} since you saw .*\(HEAD_MOVED, HTTP 409\)/);
    expect((await run(["cr", "merge", "1", "--match-head-commit", "abc"])).code).toBe(2);
    expect((await run(["cr", "ls"])).stdout).toContain("#1\topen");
    const merged = await run(["cr", "merge", "1", "--match-head-commit", head]);
    expect(merged.code, merged.stderr).toBe(0);
    expect((await run(["cr", "ls"])).stdout).toBe("");
    expect((await run(["cr", "ls", "--status", "merged"])).stdout).toContain("#1\tmerged");
    const again = await run(["cr", "merge", "1"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/409/);
    expect((await run(["cr", "close", "1"])).code).toBe(1);
  });

  it("reports conflicts in show and refuses the merge with exit 1", async () => {
    await sh(repoDir, "git checkout -q main && git merge -q --ff-only feature");
    await sh(repoDir, "git checkout -qb side && echo side > README.md && git commit -qam side");
    expect((await run(["ship"])).code).toBe(0);
    await sh(repoDir, "git checkout -q main && echo main > README.md && git commit -qam main-change");
    const shipped = await run(["ship"]);
    expect(shipped.stdout.trim(), shipped.stderr).toBe("#2");
    expect((await run(["cr", "merge", "2"])).code).toBe(0);
    await run(["cr", "open", "--title", "Conflicting", "--head", "side"]);
    const show = await run(["cr", "show", "3"]);
    expect(show.stdout).toContain("conflicts:\n  README.md");
    const merge = await run(["cr", "merge", "3", "--message", "try"]);
    expect(merge.code).toBe(1);
    expect(merge.stderr).toContain("Merge failed");
    expect((await run(["cr", "close", "3"])).code).toBe(0);
    expect((await run(["cr", "reopen", "#3"])).code).toBe(0);
    expect((await run(["cr", "reopen", "#3"])).code).toBe(1);
  });

  it("resolves the project: --project, then SVC_PROJECT_ID, then link.json in an ancestor", async () => {
    const nested = join(repoDir, "deep", "dir");
    mkdirSync(nested, { recursive: true });
    expect((await run(["cr", "ls", "--status", "all", "--json"], { cwd: nested })).code).toBe(0);
    const outside = mkdtempSync(join(tmpdir(), "svc-unlinked-"));
    const none = await run(["cr", "ls"], { cwd: outside });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("projects link");
    expect((await run(["cr", "ls", "--project", projectId], { cwd: outside })).code).toBe(0);
    expect((await run(["cr", "ls"], { cwd: outside, env: { SVC_PROJECT_ID: projectId } })).code).toBe(0);
    const wrong = await run(["cr", "ls", "--project", "00000000-0000-4000-8000-000000000000"], {
      env: { SVC_PROJECT_ID: projectId },
    });
    expect(wrong.code).toBe(1);

    expect((await run(["projects", "link", projectId], { cwd: outside })).code).toBe(0);
    expect(JSON.parse(readFileSync(join(outside, ".svc/link.json"), "utf8")).project_id).toBe(projectId);
    expect((await run(["cr", "ls"], { cwd: outside })).code).toBe(0);
    expect((await run(["projects", "unlink"], { cwd: outside })).code).toBe(0);
    expect(existsSync(join(outside, ".svc/link.json"))).toBe(false);
  });

  it("uses SVC_CLI_TOKEN over SVC_EXECUTOR_TOKEN over the stored login, and SVC_API_URL over the host", async () => {
    const minted = await call(api.url, "POST", `/v1/projects/${projectId}/cli-token`, { token: user.token });
    const sandbox = { SVC_CLI_TOKEN: minted.body.token, SVC_API_URL: `${api.url}/v1`, SVC_PROJECT_ID: projectId };
    const outside = mkdtempSync(join(tmpdir(), "svc-sandbox-"));
    const ls = await run(["cr", "ls", "--status", "all", "--json"], {
      cwd: outside,
      env: { ...sandbox, SVC_CONFIG_FILE: join(outside, "none.json") },
    });
    expect(ls.code, ls.stderr).toBe(0);
    expect((await run(["whoami"], { cwd: outside, env: sandbox })).code).toBe(1);
    const executor = { SVC_EXECUTOR_TOKEN: minted.body.token, SVC_API_URL: `${api.url}/v1`, SVC_PROJECT_ID: projectId };
    expect(
      (await run(["cr", "ls"], { cwd: outside, env: { ...executor, SVC_CONFIG_FILE: join(outside, "none.json") } }))
        .code,
    ).toBe(0);
    const bad = await run(["cr", "ls"], { cwd: outside, env: { ...sandbox, SVC_CLI_TOKEN: "svc_pat_bad" } });
    expect(bad.code).toBe(1);
    // The sandbox service key is never read as an API token.
    const svcOnly = await run(["cr", "ls"], {
      cwd: outside,
      env: { SVC_TOKEN: user.token, SVC_CONFIG_FILE: join(outside, "none.json"), SVC_PROJECT_ID: projectId },
    });
    expect(svcOnly.code).toBe(1);
    expect(svcOnly.stderr).toMatch(/not logged in/);
  });

  it("opens a CR with the in-sandbox defaults (head, session, project from the environment)", async () => {
    await sh(
      repoDir,
      "git checkout -q -b agent-branch main && echo agent > agent.txt && git add -A && git commit -qm agent",
    );
    expect((await run(["ship"])).code).toBe(0);
    const outside = mkdtempSync(join(tmpdir(), "svc-sandbox-"));
    const minted = await call(api.url, "POST", `/v1/projects/${projectId}/cli-token`, { token: user.token });
    const res = await run(["cr", "open", "--title", "From a session", "--json"], {
      cwd: outside,
      env: {
        SVC_CLI_TOKEN: minted.body.token,
        SVC_API_URL: `${api.url}/v1`,
        SVC_PROJECT_ID: projectId,
        SVC_BRANCH_NAME: "agent-branch",
        SVC_SESSION_ID: "no-such-session",
      },
    });
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({
      head_ref: "agent-branch",
      base_ref: "main",
      origin_session_id: null,
    });
    const noHead = await run(["cr", "open", "--title", "x"], {
      cwd: outside,
      env: { SVC_CLI_TOKEN: minted.body.token, SVC_API_URL: `${api.url}/v1`, SVC_PROJECT_ID: projectId },
    });
    expect(noHead.code).toBe(2);
  });

  it("brings merged work back: plain `git pull svc main` authenticates through svc, then ship opens a CR", async () => {
    const gitEnv = { ...GIT_ENV, SVC_CONFIG_FILE: env.SVC_CONFIG_FILE! };
    await sh(repoDir, "git checkout -q main && git checkout -qb pulled && echo pulled > pulled.txt && git add -A");
    await sh(repoDir, "git commit -qm pulled");
    expect((await run(["ship"])).code).toBe(0);
    await sh(repoDir, "git checkout -q main");
    const opened = await run(["cr", "open", "--title", "Pulled", "--head", "pulled"]);
    expect(opened.code, opened.stderr).toBe(0);
    const merged = await run(["cr", "merge", opened.stdout.trim()]);
    expect(merged.code, merged.stderr).toBe(0);

    const pull = await execa("git", ["pull", "-q", "--no-rebase", "svc", "main"], {
      cwd: repoDir,
      env: gitEnv,
      reject: false,
    });
    expect(pull.exitCode, pull.stderr).toBe(0);
    expect(readFileSync(join(repoDir, "pulled.txt"), "utf8")).toBe("pulled\n");
    const config = readFileSync(join(repoDir, ".git", "config"), "utf8");
    expect(config).toContain("git-credential");
    expect(config).not.toContain(user.token);

    await sh(repoDir, "echo more > more.txt && git add -A && git commit -qm more");
    const ship = await run(["ship"]);
    expect(ship.code, ship.stderr).toBe(0);
    expect(ship.stdout.trim()).toMatch(/^#\d+$/);

    // Logged out, the helper answers nothing: git fails as unauthenticated instead of using a stale token.
    const out = { ...env, SVC_CONFIG_FILE: join(mkdtempSync(join(tmpdir(), "svc-nologin-")), "config.json") };
    const denied = await execa("git", ["fetch", "-q", "svc", "main"], {
      cwd: repoDir,
      env: { ...GIT_ENV, SVC_CONFIG_FILE: out.SVC_CONFIG_FILE },
      reject: false,
    });
    expect(denied.exitCode).not.toBe(0);
  });

  it("a later ship on main opens one CR per commit on a ship/ branch; --merge lands it; git push to main is refused", async () => {
    const bare = api.services.repos.managedDir(projectId);
    const tipOf = async (ref: string) => (await git(["rev-parse", ref], { dir: bare })).stdout.trim();
    // main here is the server's main and the commit `more`, whose CR is still open.
    await sh(repoDir, "git checkout -q main && echo one > shipped.txt && git add -A && git commit -qm 'Add shipped'");
    await sh(repoDir, "echo two >> shipped.txt && git commit -qam 'Extend shipped'");
    const head = (await sh(repoDir, "git rev-parse HEAD")).stdout.trim();
    const branch = `ship/${head.slice(0, 12)}`;
    const before = await tipOf("main");

    const ship = await run(["ship"]);
    expect(ship.code, ship.stderr).toBe(0);
    const number = ship.stdout.trim();
    expect(number).toMatch(/^#\d+$/);
    expect(ship.stderr).toContain(`opened CR ${number}: Extend shipped (and 2 more commits) (${branch} -> main)`);
    expect(await tipOf("main")).toBe(before);
    expect(await tipOf(branch)).toBe(head);

    // The same commit shipped again finds its CR instead of opening a second one.
    const again = await run(["deploy", "--json"]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      project_id: projectId,
      branch,
      commit: head,
      created: false,
      remote: "svc",
      change_request: { number: Number(number.slice(1)), status: "open", head_ref: branch, base_ref: "main" },
    });
    const all = JSON.parse((await run(["cr", "ls", "--status", "all", "--json"])).stdout);
    const mine = all.filter((c: { head_ref: string }) => c.head_ref === branch);
    expect(mine).toHaveLength(1);
    expect(mine[0].description).toBe("- more\n- Add shipped\n- Extend shipped");

    const merged = await run(["ship", "--merge"]);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout.trim()).toBe(number);
    expect(merged.stderr).toContain(`merged CR ${number} into main (fast-forward)`);
    expect(await tipOf("main")).toBe(head);
    expect(JSON.parse((await run(["cr", "show", number, "--json"])).stdout).change_request.status).toBe("merged");

    const nothing = await run(["ship"]);
    expect(nothing.code, nothing.stderr).toBe(0);
    expect(nothing.stdout).toBe("");
    expect(nothing.stderr).toContain("nothing to ship");

    // Plain git cannot move main either: the server names the way that can.
    await sh(repoDir, "echo mine > shipped.txt && git commit -qam mine");
    const gitEnv = { ...GIT_ENV, SVC_CONFIG_FILE: env.SVC_CONFIG_FILE! };
    const push = await execa("git", ["push", "svc", "main"], { cwd: repoDir, env: gitEnv, reject: false });
    expect(push.exitCode).not.toBe(0);
    expect(push.stderr).toContain("svc cr open");
    expect(await tipOf("main")).toBe(head);

    // Someone else's change to the same lines lands first: --merge leaves the CR open and says which.
    await sh(repoDir, `git checkout -q -b theirs ${head} && echo theirs > shipped.txt && git commit -qam theirs`);
    expect((await run(["ship"])).code).toBe(0);
    const theirs = await run(["cr", "open", "--title", "Theirs", "--head", "theirs"]);
    expect((await run(["cr", "merge", theirs.stdout.trim()])).code).toBe(0);
    await sh(repoDir, "git checkout -q main");
    const conflict = await run(["ship", "--merge"]);
    expect(conflict.code).toBe(1);
    expect(conflict.stdout).toBe("");
    const open = /opened CR (#\d+)/.exec(conflict.stderr)?.[1];
    expect(conflict.stderr).toMatch(new RegExp(`CR ${open} stays open, not merged: Merge failed.*MERGE_CONFLICT`));
    expect(JSON.parse((await run(["cr", "show", open!, "--json"])).stdout).change_request.status).toBe("open");
    const retry = await run(["ship", "--merge"]);
    expect(retry.code).toBe(1);
    expect(retry.stderr).toContain(`CR ${open} is already open`);
    await sh(repoDir, "git checkout -q theirs");
    expect((await run(["ship", "--merge"])).code).toBe(2);
  });

  it("creates projects for external repositories and prints the id", async () => {
    const created = await run([
      "projects",
      "create",
      "Upstream",
      "--repo",
      "https://git.example.test/upstream.git",
      "--default-branch",
      "trunk",
    ]);
    expect(created.code, created.stderr).toBe(0);
    const info = JSON.parse((await run(["projects", "info", created.stdout.trim(), "--json"])).stdout);
    expect(info).toMatchObject({
      repo_kind: "external",
      repo_url: "https://git.example.test/upstream.git",
      default_branch: "trunk",
    });
    expect((await run(["projects", "create", "Bad", "--repo", "ext::sh -c id"])).code).toBe(1);
  });
});
