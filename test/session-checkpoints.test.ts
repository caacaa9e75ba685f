import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createIdleSweeper } from "../orchestrator/idle-sweeper.ts";
import { Session } from "../protocol/session.ts";
import { svc } from "./support/cli.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { waitFor } from "./support/wait.ts";

/**
 * Checkpoints on the real API, Docker and sandbox daemon: what a sandbox had not pushed when it stopped (files,
 * untracked ones too, and local commits) is kept at refs/svc/checkpoints/<session id>, never on the session branch,
 * and put back into the session's next sandbox; one that no longer fits is left at its ref and said so.
 */
describe("session checkpoints: unsaved work survives a stop into the next sandbox", () => {
  let sp: SandboxedProject;
  let id: string;

  const info = async () => Session.parse((await sp.sessions(`/${id}`)).body);
  const sh = async (command: string) => {
    const res = await svc(["sessions", "exec", id, "--", "sh", "-c", `cd /workspace && ${command}`], {
      env: sp.cliEnv,
    });
    expect(res.code, res.stderr).toBe(0);
    return res.stdout;
  };
  const running = () =>
    waitFor(
      "the session running",
      async () => {
        const s = await info();
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        return s.status === "running";
      },
      { timeoutMs: 120_000 },
    );
  const stop = async () => {
    expect((await sp.sessions(`/${id}/stop`, "POST", {})).status).toBe(200);
    return info();
  };
  const restart = async () => {
    expect((await sp.sessions(`/${id}/restart`, "POST", {})).status).toBe(200);
    await running();
  };
  /** The project repository's refs, as a person's clone sees them. */
  const remoteRefs = async () => {
    const repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    const { stdout } = await repo.git(["ls-remote", "origin"]);
    return new Map(
      stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("\t").reverse() as [string, string]),
    );
  };

  beforeAll(async () => {
    sp = await startSandboxedProject("Checkpointed");
    const created = await sp.sessions("", "POST", {});
    expect(created.status).toBe(201);
    id = created.body.session_id;
    await running();
  }, 300_000);
  afterAll(() => sp?.close());

  it("saves edits, untracked files and local commits on stop, off the branch, and restores them on restart", async () => {
    const branchTip = (await remoteRefs()).get(`refs/heads/${id}`);
    await sh(
      "git commit -qam local --allow-empty && echo edited >> README.md && printf 'draft\\n' > draft.txt && " +
        "mkdir -p .cache && echo ignored > .cache/x && echo .cache/ > .gitignore",
    );
    const stopped = await stop();
    expect(stopped.checkpoint_sha).toMatch(/^[0-9a-f]{40}$/);
    const refs = await remoteRefs();
    expect(refs.get(`refs/svc/checkpoints/${id}`)).toBe(stopped.checkpoint_sha);
    expect(refs.get(`refs/heads/${id}`)).toBe(branchTip);

    await restart();
    const logs = await svc(["sessions", "logs", id], { env: sp.cliEnv });
    expect(logs.stdout).toContain(`restored checkpoint ${stopped.checkpoint_sha} into the workspace`);
    expect(await sh("cat draft.txt README.md; git log -1 --format=%s; git status --porcelain | sort")).toBe(
      "draft\nhi\nedited\nlocal\n M README.md\n?? .gitignore\n?? draft.txt",
    );
    // .gitignore'd files are not kept.
    expect(await sh("test -e .cache/x && echo kept || echo gone")).toBe("gone");
  }, 300_000);

  it("has none once everything is pushed: the ref goes, and nothing is put back", async () => {
    await sh("git add -A && git commit -qm everything && git push -q origin HEAD");
    const stopped = await stop();
    expect(stopped.checkpoint_sha).toBeNull();
    expect((await remoteRefs()).has(`refs/svc/checkpoints/${id}`)).toBe(false);
    await restart();
    expect(await sh("git status --porcelain; git log -1 --format=%s")).toBe("everything");
  }, 300_000);

  it("leaves a checkpoint the branch moved past at its ref, says so, and restores nothing", async () => {
    await sh("printf 'second draft\\n' > draft2.txt");
    const stopped = await stop();
    expect(stopped.checkpoint_sha).toMatch(/^[0-9a-f]{40}$/);
    // A person pushes to the session branch meanwhile.
    const repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await repo.git(["fetch", "-q", "origin", id]);
    await repo.git(["checkout", "-q", "-b", "work", "FETCH_HEAD"]);
    await repo.commit("a person's fix", { "FIX.md": "fixed\n" });
    await repo.pushed(`HEAD:refs/heads/${id}`);

    await restart();
    expect(await sh("test -e draft2.txt && echo kept || echo gone; git log -1 --format=%s")).toBe(
      "gone\na person's fix",
    );
    const logs = await svc(["sessions", "logs", id], { env: sp.cliEnv });
    expect(logs.stdout).toMatch(
      new RegExp(`checkpoint ${stopped.checkpoint_sha} not restored, left at its ref: the session branch moved`),
    );
    expect((await remoteRefs()).get(`refs/svc/checkpoints/${id}`)).toBe(stopped.checkpoint_sha);
    expect((await info()).checkpoint_sha).toBe(stopped.checkpoint_sha);
  }, 300_000);

  it("refs/svc/ is svc's: a person cannot write a checkpoint, a sandbox cannot write or see another session's", async () => {
    const repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await repo.commit("planted", { "x.txt": "x\n" });
    const planted = await repo.push(`+HEAD:refs/svc/checkpoints/${id}`);
    expect(planted.code).not.toBe(0);
    expect(planted.stderr).toContain("refs/svc/ is written by svc alone");

    const other = (await sp.sessions("", "POST", {})).body.session_id as string;
    await waitFor("the other session running", async () => (await sp.sessions(`/${other}`)).body.status === "running", {
      timeoutMs: 120_000,
    });
    const fromOther = (command: string) =>
      svc(["sessions", "exec", other, "--", "sh", "-c", `cd /workspace && ${command}`], { env: sp.cliEnv });
    const seen = await fromOther("git ls-remote origin 'refs/svc/*'");
    expect(seen.stdout).not.toContain(id);
    const wrote = await fromOther(`git push origin +HEAD:refs/svc/checkpoints/${id} 2>&1`);
    expect(wrote.code).not.toBe(0);
    expect(wrote.stdout).toContain("refs/svc/ is written by svc alone");
    const fetched = await fromOther(`git fetch origin refs/svc/checkpoints/${id} 2>&1`);
    expect(fetched.code).not.toBe(0);
    await sp.sessions(`/${other}`, "DELETE");
  }, 300_000);

  it("an idle hibernation keeps the work too, and waking the session brings it back", async () => {
    await sh("printf 'idle draft\\n' > idle.txt");
    const sweep = createIdleSweeper({
      records: sp.api.services.sessionStore,
      provisioner: sp.api.services.orchestrator!.provisioner,
      idleMs: 1,
      log: () => {},
    });
    expect(await sweep()).toContain(id);
    const slept = await info();
    expect(slept.status).toBe("stopped");
    expect(slept.checkpoint_sha).toMatch(/^[0-9a-f]{40}$/);
    await restart();
    expect(await sh("cat idle.txt")).toBe("idle draft");
  }, 300_000);
});
