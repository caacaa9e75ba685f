import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChangeRequest } from "../protocol/change-request.ts";
import { CheckRunList } from "../protocol/cr-check.ts";
import { call } from "./support/api-server.ts";
import { svc } from "./support/cli.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";

const SECRET = "s3cret-value-checks";

/** The checks svc.toml names on the default branch: the repository's own script decides. */
const MANIFEST = `[[checks]]
name = "rules"
run = "sh check.sh"
timeout = 60

[review]
fix_checks = true
max_fix_rounds = 1
`;
/** Each of x.txt and y.txt is fine alone; both together break the rule. */
const RULE = `echo "checking with $CHECK_SECRET"
if [ -f x.txt ] && [ -f y.txt ]; then echo "x.txt and y.txt together break the build"; exit 3; fi
if [ -f broken.txt ]; then echo "broken.txt must not exist"; exit 4; fi
echo ok
`;

/**
 * CR checks on the real API, Docker and sandboxes: each new head of an open CR runs the default branch's
 * [[checks]] in a sandbox of its own on the commit its merge would make; a failing check blocks the merge (409)
 * until a fix passes; the merge queue merges green CRs one at a time per base and re-checks each on the base it
 * will land on, so two CRs green alone never make a red main.
 */
describe("CR checks, the merge gate and the merge queue (real sandboxes)", () => {
  let sp: SandboxedProject;
  let repo: WorkRepo;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  const crs = () => `/v1/projects/${sp.project.id}/change-requests`;
  const api = (method: string, path: string, body?: unknown) =>
    call(sp.api.url, method, `${crs()}${path}`, { token: sp.user.token, body });
  const cr = async (n: number) => ChangeRequest.parse((await api("GET", `/${n}`)).body.change_request);
  const checks = async (n: number) => CheckRunList.parse((await api("GET", `/${n}/checks`)).body);
  const settled = (n: number, head: string) =>
    waitFor(
      `CR #${n}'s checks of ${head.slice(0, 8)} finished`,
      async () => {
        const runs = await checks(n);
        return runs.length > 0 && runs.every((r) => r.head_sha === head && r.finished_at !== null) && runs;
      },
      { timeoutMs: 120_000 },
    );
  const open = async (branch: string, title: string) => {
    const opened = await api("POST", "", { title, head_ref: branch });
    expect(opened.status, JSON.stringify(opened.body)).toBe(201);
    return opened.body.number as number;
  };

  beforeAll(async () => {
    llm = await startScriptedLlm([
      {
        when: 'The check "rules" of CR',
        steps: [
          {
            tool: "bash",
            args: {
              command: "git rm -q broken.txt && git commit -qm 'remove broken.txt' && git push -q origin HEAD",
              description: "fix the failing check",
            },
          },
          { text: "Fixed." },
        ],
      },
    ]);
    sp = await startSandboxedProject(
      "Checked",
      { llm: { baseUrl: llm.url, apiKey: "checks", model: "scripted" } },
      { background: true },
    );
    repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("main", { create: true, from: "origin/main" });
    await repo.commit("checks", { "svc.toml": MANIFEST });
    await landOnDefault(sp.api.url, sp.user.token, sp.project.id, repo, "add checks");
    const secret = await call(sp.api.url, "PUT", `/v1/projects/${sp.project.id}/secrets`, {
      token: sp.user.token,
      body: { secrets: { CHECK_SECRET: SECRET } },
    });
    expect(secret.status).toBe(200);
  }, 300_000);
  afterAll(async () => {
    await sp?.close();
    llm?.close();
  });

  it("a failing check blocks the merge with 409, its log kept with secrets masked; a fix passes and merges", async () => {
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("rule", { create: true, from: "origin/main" });
    const broken = await repo.commit("a rule that fails", {
      "check.sh": `echo "checking with $CHECK_SECRET"\necho boom >&2\nexit 1\n`,
    });
    await repo.pushed("rule");
    const n = await open("rule", "The rule");

    const [failed] = await settled(n, broken);
    expect(failed).toMatchObject({ name: "rules", status: "failed", exit_code: 1, head_sha: broken });
    expect(failed!.log).toContain("boom");
    expect(failed!.log).not.toContain(SECRET);
    // The commit it ran on is kept at refs/svc/merges/<n>: here the head itself, which fast-forwards the base.
    const bare = sp.api.services.repos.managedDir(sp.project.id);
    const kept = await execa("git", ["rev-parse", `refs/svc/merges/${n}`], { cwd: bare });
    expect(kept.stdout.trim()).toBe(broken);
    expect(failed!.commit_sha).toBe(broken);
    expect(await cr(n)).toMatchObject({ checks_status: "failed", mergeable: false });
    const refused = await api("POST", `/${n}/merge`, {});
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("CHECKS_NOT_PASSED");
    expect(refused.body.error).toContain("rules (failed)");
    // A check's sandbox runs under a session of its own, never listed with the agents'.
    expect((await sp.sessions()).body.sessions ?? (await sp.sessions()).body).toEqual([]);

    const fixed = await repo.commit("the real rule", { "check.sh": RULE });
    await repo.pushed("rule");
    const [passed] = await settled(n, fixed);
    expect(passed).toMatchObject({ status: "passed", exit_code: 0 });
    expect(passed!.log).toContain("ok");
    expect(await cr(n)).toMatchObject({ checks_status: "passed", mergeable: true });
    const merged = await api("POST", `/${n}/merge`, {});
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
  }, 300_000);

  it("the merge queue merges green CRs one at a time and catches two that break main together", async () => {
    await repo.git(["fetch", "-q", "origin", "main"]);
    const branches: Record<string, number> = {};
    for (const file of ["x", "y"]) {
      await repo.checkout(`add-${file}`, { create: true, from: "origin/main" });
      await repo.commit(`add ${file}`, { [`${file}.txt`]: `${file}\n` });
      await repo.pushed(`add-${file}`);
      branches[file] = await open(`add-${file}`, `Add ${file}`);
    }
    const [x, y] = [branches.x!, branches.y!];
    // Both green alone, on today's main.
    for (const n of [x, y]) await settled(n, (await cr(n)).head_commit_sha!);
    expect((await cr(x)).checks_status).toBe("passed");
    expect((await cr(y)).checks_status).toBe("passed");

    for (const n of [x, y]) {
      const queued = await api("POST", `/${n}/merge`, { auto: true });
      expect(queued.status, JSON.stringify(queued.body)).toBe(202);
      expect(queued.body.auto_merge).toBe(true);
    }
    await waitFor("x merged", async () => (await cr(x)).status === "merged", { timeoutMs: 60_000 });
    // y was green on the old main: on the main it would land on, its checks run again and fail.
    const out = await waitFor(
      "y taken out of the queue",
      async () => {
        const now = await cr(y);
        return !now.auto_merge && now.auto_merge_note !== null && now;
      },
      { timeoutMs: 120_000 },
    );
    expect(out.status).toBe("open");
    expect(out.auto_merge_note).toContain("'rules' failed");
    const [rerun] = await checks(y);
    expect(rerun).toMatchObject({ status: "failed", exit_code: 3 });
    expect(rerun!.base_sha).toBe((await cr(x)).merge_commit_sha);
    // It ran on the merge of y's head into that base, kept at refs/svc/merges/<y>.
    const bare = sp.api.services.repos.managedDir(sp.project.id);
    const kept = (await execa("git", ["rev-parse", `refs/svc/merges/${y}`], { cwd: bare })).stdout.trim();
    expect(kept).toBe(rerun!.commit_sha);
    const parents = await execa("git", ["rev-list", "--parents", "-n1", kept], { cwd: bare });
    expect(parents.stdout.trim().split(" ").slice(1)).toEqual([rerun!.base_sha, rerun!.head_sha]);
    expect(rerun!.log).toContain("x.txt and y.txt together break the build");
    // main holds x alone.
    await repo.git(["fetch", "-q", "origin", "main"]);
    const tree = await repo.git(["ls-tree", "--name-only", "origin/main"]);
    expect(tree.stdout.split("\n")).toContain("x.txt");
    expect(tree.stdout.split("\n")).not.toContain("y.txt");
  }, 300_000);

  it("[review] fix_checks: a failed check of the agent's own CR goes back to it, and its fix updates the same CR", async () => {
    const created = await sp.sessions("", "POST", {});
    expect(created.status).toBe(201);
    const id = created.body.session_id as string;
    await waitFor("the agent's session running", async () => (await sp.sessions(`/${id}`)).body.status === "running", {
      timeoutMs: 120_000,
    });
    const opened = await svc(
      [
        "sessions",
        "exec",
        id,
        "--",
        "sh",
        "-c",
        "echo oops > broken.txt && git add broken.txt && git commit -qm broken && git push -q origin HEAD && svc cr open --title 'Agent work' --json",
      ],
      { env: sp.cliEnv },
    );
    expect(opened.code, opened.stderr).toBe(0);
    const { number, head_commit_sha: broken } = JSON.parse(opened.stdout);
    expect((await cr(number)).origin_session_id).toBe(id);
    const [failed] = await settled(number, broken);
    expect(failed).toMatchObject({ status: "failed", exit_code: 4 });

    // The agent read the check's name, its command and the end of its log, then pushed its fix to the same CR. Its
    // runtime's first turn in a one-core sandbox (boot and agent loop, some 10 CPU-s) is what this waits on.
    const prompt = await waitFor(
      "the failed check reaching the agent's model",
      async () => llm.turns().find((t) => t.includes('The check "rules" of CR')),
      { timeoutMs: 120_000 },
    );
    expect(prompt).toContain("sh check.sh");
    expect(prompt).toContain("broken.txt must not exist");
    const fixed = await waitFor(
      "the agent's fix on the CR",
      async () => {
        const now = await cr(number);
        return now.head_commit_sha !== broken && now.head_commit_sha !== null && now.head_commit_sha;
      },
      { timeoutMs: 120_000 },
    );
    const [passed] = await settled(number, fixed);
    expect(passed).toMatchObject({ status: "passed" });
    expect(await cr(number)).toMatchObject({ status: "open", checks_status: "passed", mergeable: true });
  }, 300_000);

  it("a check past its timeout fails; a run whose API process died runs again; nothing is lost", async () => {
    // The default branch gains a second check, landed through a CR whose checks pass.
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("hang-check", { create: true, from: "origin/main" });
    await repo.commit("a check with a timeout", {
      "svc.toml": `${MANIFEST}\n[[checks]]\nname = "hang"\nrun = "if [ -f hang.txt ]; then echo hanging; sleep 60; fi"\ntimeout = 3\n`,
    });
    await repo.pushed("hang-check");
    const landing = await open("hang-check", "A check with a timeout");
    await settled(landing, (await cr(landing)).head_commit_sha!);
    expect((await api("POST", `/${landing}/merge`, {})).status).toBe(200);

    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("hang", { create: true, from: "origin/main" });
    const head = await repo.commit("hang", { "hang.txt": "1\n" });
    await repo.pushed("hang");
    const n = await open("hang", "Hangs");
    const runs = await settled(n, head);
    expect(runs.map((r) => r.name)).toEqual(["rules", "hang"]);
    expect(runs[1]).toMatchObject({ status: "failed", exit_code: null });
    expect(runs[1]!.log).toContain("hanging");
    expect(runs[1]!.log).toContain("[timed out after 3 s]");
    const took = Date.parse(runs[1]!.finished_at!) - Date.parse(runs[1]!.started_at!);
    expect(took).toBeLessThan(30_000);

    // A run an API process took and then died with (its instance holds no lock): the sweep queues it again.
    const [row] = await sp.db.sql.query<{ cr_id: string }>(
      "select cr_id from change_requests where project_id = $1 and number = $2",
      [sp.project.id, n],
    );
    await sp.db.sql.query(
      `update cr_check_runs set status = 'running', instance_id = 'a-process-that-died', log = 'half', finished_at = null,
         exit_code = null where cr_id = $1 and name = 'rules'`,
      [row!.cr_id],
    );
    const again = await waitFor(
      "the orphaned run finished again",
      async () => {
        const [rules] = await checks(n);
        return rules?.status === "passed" && rules.log !== "half" && rules;
      },
      { timeoutMs: 60_000 },
    );
    expect(again.head_sha).toBe(head);
  }, 300_000);
});
