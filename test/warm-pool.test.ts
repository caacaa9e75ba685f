import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinCluster } from "../orchestrator/cluster.ts";
import { call } from "./support/api-server.ts";
import { svc } from "./support/cli.ts";
import { execIn } from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";
import { type PooledContainer, readyPoolMember } from "./support/warm-pool.ts";

const CR_PROMPT = "Commit pooled.txt and open a change request";

/**
 * The warm pool on the real API, Docker and sandbox image, opencode and a scripted model: a session claims a
 * sandbox made, seeded and warmed before it was asked for, and gets nothing of any other session.
 */
describe("warm sandbox pool (SVC_POOL_SIZE=1)", () => {
  let sp: SandboxedProject;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;

  const containerOf = async (sessionId: string) =>
    (
      (await sp.docker.listContainers({
        all: true,
        filters: { label: [`dev.svc.session=${sessionId}`] },
      })) as PooledContainer[]
    )[0];
  /** A pooled sandbox that answers `ready`: what the next session claims. */
  const readyMember = (runtime?: "running" | "on-claim") =>
    readyPoolMember(
      sp.docker,
      sp.project.id,
      async (id) => (await sp.sessions(`/${id}`)).status === 200,
      sp.api.services.sandboxLinks.endpoint,
      { runtime },
    );
  /**
   * The session's container, which must be a pooled sandbox made before `asked`: made under the session's id, so
   * the session took it. Which one, when a burst grew the pool to two, is the pool's choice.
   */
  const claimedMember = async (sessionId: string, asked: number) => {
    const container = await containerOf(sessionId);
    expect(container?.Labels["dev.svc.pool"], "a pooled sandbox").toBeTruthy();
    expect(container!.Created * 1000).toBeLessThan(asked);
    return container!;
  };
  const running = (id: string) =>
    waitFor(
      `session ${id} running`,
      async () => {
        const s = (await sp.sessions(`/${id}`)).body;
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        return s.status === "running" ? s : undefined;
      },
      { timeoutMs: 120_000 },
    );
  const exec = (id: string, command: string) =>
    svc(["sessions", "exec", id, "--", "sh", "-c", command], { env: sp.cliEnv });

  beforeAll(async () => {
    llm = await startScriptedLlm([
      {
        when: CR_PROMPT,
        steps: [
          {
            tool: "bash",
            args: {
              command:
                "echo pooled > pooled.txt && git add pooled.txt && git commit -qm pooled && git push -q origin HEAD && svc cr open --title pooled",
              description: "commit, push and open a CR",
            },
          },
          { text: "Opened." },
        ],
      },
    ]);
    sp = await startSandboxedProject("Pool", {
      sessionCap: 10,
      poolSize: 1,
      llm: { baseUrl: llm.url, apiKey: "pool", model: "scripted" },
    });
  }, 400_000);
  afterAll(async () => {
    await sp?.close();
    llm?.close();
  });

  it("the first session starts cold and fills the pool; the next claims the ready sandbox under its id", async () => {
    const first = (await sp.sessions("", "POST", {})).body;
    const cpuShares = async (id: string) => (await sp.docker.getContainer(id).inspect()).HostConfig.CpuShares;
    // The pool's member boots at the engine's least CPU weight: work done ahead of demand goes last on a busy host.
    const booting = await waitFor(
      "a pooled sandbox booting at 2 CPU shares",
      async () => {
        const [c] = await sp.docker.listContainers({
          filters: { label: [`dev.svc.project=${sp.project.id}`, "dev.svc.pool"] },
        });
        return c && (await cpuShares(c.Id)) === 2 ? c : undefined;
      },
      { timeoutMs: 120_000 },
    );
    await running(first.session_id);
    const member = await readyMember("running");
    expect(member.Id).toBe(booting.Id);
    // Its warm-up ran opencode's first agent loop against a loopback model: not one call reached the gateway.
    expect(llm.requests()).toBe(0);
    // opencode writes its log behind the warm-up's answer: read it until both lines are in, or fail naming them.
    const opencodeLog = await waitFor(
      "the warm-up's lines in opencode's log",
      async () => {
        const log = execFileSync("docker", [
          "exec",
          member.Id,
          "sh",
          "-c",
          "cat /opt/svc/home/.local/share/opencode/log/*.log",
        ]).toString();
        return /llm\.provider=svc-warmup/.test(log) && /evaluated permission=bash pattern=true/.test(log) && log;
      },
      { timeoutMs: 10_000 },
    );
    expect(opencodeLog).toMatch(/llm\.provider=svc-warmup/);
    // Ready, its boot over, it weighs what any sandbox does: its health checks and its claim never starve. The first
    // session's own sandbox started at the default.
    expect(await cpuShares(member.Id)).toBe(1024);
    expect(await cpuShares((await containerOf(first.session_id))!.Id)).toBe(1024);

    const asked = Date.now();
    const created = await sp.sessions("", "POST", { prompt: CR_PROMPT });
    expect(created.status).toBe(201);
    // The session took a pooled sandbox's id: its container, labels and branch were made before it was asked.
    await claimedMember(created.body.session_id, asked);
    await running(created.body.session_id);

    // Its agent's shell has the session's CLI token (from the claim): it pushes and opens the CR as the session.
    const cr = await waitFor(
      "the pooled session's CR",
      async () => {
        const list = await call(sp.api.url, "GET", `/v1/projects/${sp.project.id}/change-requests?status=all`, {
          token: sp.user.token,
        });
        return list.body.change_requests?.find(
          (c: { origin_session_id: string }) => c.origin_session_id === created.body.session_id,
        );
      },
      { timeoutMs: 60_000 },
    );
    expect(cr, JSON.stringify(cr)).toMatchObject({
      title: "pooled",
      head_ref: created.body.session_id,
      base_ref: "main",
    });

    // `sessions exec` sees the session's variables too, though the container was created without them.
    const env = await exec(created.body.session_id, "env");
    expect(env.stdout).toContain(`SVC_SESSION_ID=${created.body.session_id}`);
    expect(env.stdout).toMatch(/^SVC_CLI_TOKEN=svc_/m);
    expect(env.stdout).not.toContain("SVC_POOLED=0");
  }, 400_000);

  it("a claimed sandbox carries nothing of an earlier claim: files, env and processes are its own", async () => {
    const a = (await sp.sessions("", "POST", {})).body.session_id as string;
    await running(a);
    await exec(a, "echo leftover > /tmp/leftover && echo leftover > left.txt && (sleep 1000 >/dev/null 2>&1 &)");
    const aEnv = await exec(a, "echo $SVC_CLI_TOKEN");
    await sp.sessions(`/${a}`, "DELETE");

    await readyMember();
    const asked = Date.now();
    const b = (await sp.sessions("", "POST", {})).body.session_id as string;
    await claimedMember(b, asked);
    await running(b);
    const seen = await exec(
      b,
      "ls /tmp/leftover left.txt 2>&1; pgrep -x sleep || echo no-sleep; echo token=$SVC_CLI_TOKEN; echo id=$SVC_SESSION_ID; git status --short | sed 's/^/changed: /'",
    );
    expect(seen.stdout).toContain("No such file");
    expect(seen.stdout).not.toMatch(/^\/tmp\/leftover$/m);
    expect(seen.stdout).toContain("no-sleep");
    expect(seen.stdout).toContain(`id=${b}`);
    expect(seen.stdout).not.toContain(aEnv.stdout.trim());
    expect(seen.stdout).not.toContain("changed:");
  }, 400_000);

  it("a pool made before main moved is replaced: the next session starts from the new main", async () => {
    await readyMember();
    const repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.git(["reset", "-q", "--hard", "FETCH_HEAD"]);
    const tip = await repo.commit("moved", { "MOVED.md": "moved\n" });
    await landOnDefault(sp.api.url, sp.user.token, sp.project.id, repo, "main moves");
    const id = (await sp.sessions("", "POST", {})).body.session_id as string;
    await running(id);
    expect((await exec(id, "git rev-parse HEAD")).stdout.trim()).toBe(tip);
  }, 400_000);

  it("a session for another model or base does not take the pool's sandbox", async () => {
    const member = await readyMember();
    const other = await sp.sessions("", "POST", { model: "another" });
    expect(other.status).toBe(201);
    expect(other.body.session_id).not.toBe(member.Labels["dev.svc.session"]);
    await sp.sessions(`/${other.body.session_id}`, "DELETE");
  }, 400_000);

  it("a session removed the moment it took a pooled sandbox leaves no container behind", async () => {
    await readyMember();
    const asked = Date.now();
    const id = (await sp.sessions("", "POST", {})).body.session_id as string;
    const member = await claimedMember(id, asked);
    expect((await sp.sessions(`/${id}`, "DELETE")).status).toBe(204);
    await waitFor(
      "the claimed container removed",
      async () => (await sp.docker.listContainers({ all: true, filters: { id: [member.Id] } })).length === 0,
      { timeoutMs: 30_000 },
    );
  }, 400_000);

  it("a secret changed or removed after the pool filled never reaches the next session with its old value", async () => {
    const secrets = (method: string, body: unknown) =>
      call(sp.api.url, method, `/v1/projects/${sp.project.id}/secrets`, { token: sp.user.token, body });
    expect((await secrets("PUT", { secrets: { POOL_OLD: "leaked", POOL_KEY: "one" } })).status).toBe(200);
    const member = await waitFor(
      "a pooled sandbox holding the secrets",
      async () => {
        const m = await readyMember();
        // The member made before the change is replaced on the pool's next check (it may go while we look).
        const seen = await execIn(sp.docker, m.Id, ["sh", "-c", "echo key=$POOL_KEY"]).catch(() => undefined);
        return seen?.out.includes("key=one") ? m : undefined;
      },
      { timeoutMs: 300_000 },
    );
    expect((await secrets("DELETE", { names: ["POOL_OLD"] })).status).toBe(200);
    expect((await secrets("PUT", { secrets: { POOL_KEY: "two" } })).status).toBe(200);

    // At once, before the pool's check could replace the member: the claim itself must refuse it.
    const id = (await sp.sessions("", "POST", {})).body.session_id as string;
    await running(id);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the sandbox's shell expands it, a default for an unset name.
    const seen = (await exec(id, "echo key=$POOL_KEY old=${POOL_OLD:-none}")).stdout;
    expect(seen).toContain("key=two");
    expect(seen).toContain("old=none");
    expect((await containerOf(id))!.Id).not.toBe(member.Id);
  }, 600_000);

  it("a pooled sandbox that dies is replaced, and the next session still starts", async () => {
    // The previous test's secret change makes the pool replace its member: one it removes while we look is
    // not the death under test, so take the next until the kill lands.
    const dead = await waitFor(
      "a pooled sandbox to kill",
      async () => {
        const m = await readyMember();
        return (await sp.docker
          .getContainer(m.Id)
          .kill()
          .then(() => true)
          .catch(() => false))
          ? m
          : undefined;
      },
      { timeoutMs: 120_000 },
    );
    // Asked at once, before the pool's check could notice: a claim of the dead one falls back to a cold start.
    const id = (await sp.sessions("", "POST", {})).body.session_id as string;
    await running(id);
    expect((await exec(id, "echo alive")).stdout.trim()).toBe("alive");
    await waitFor(
      "the dead pooled sandbox removed",
      async () => (await sp.docker.listContainers({ all: true, filters: { id: [dead.Id] } })).length === 0,
      { timeoutMs: 60_000 },
    );
    const replacement = await readyMember();
    expect(replacement.Id).not.toBe(dead.Id);
  }, 400_000);

  it("the reconciler leaves a live process's pooled sandboxes (no session row yet) alone, and removes a dead one's", async () => {
    const member = await readyMember();
    // The same container as a process that has left the cluster would leave behind: removed, which shows the
    // reconciler ran while it kept the live process's member.
    const inspect = await sp.docker.getContainer(member.Id).inspect();
    const orphan = await sp.docker.createContainer({
      Image: inspect.Config.Image,
      Entrypoint: ["sleep"],
      Cmd: ["600"],
      Labels: {
        ...inspect.Config.Labels,
        "dev.svc.pool": randomUUID(),
        "dev.svc.sandbox": randomUUID(),
        "dev.svc.session": randomUUID(),
      },
    });
    await orphan.start();
    const cluster = await joinCluster(sp.db.sql, { instanceId: sp.api.services.instanceId });
    // Reconciles at once: a container without a live sandbox row is otherwise an orphan it removes.
    const stop = sp.api.services.startBackgroundWork({ cluster, idleMs: 3_600_000 });
    try {
      await waitFor(
        "the reconciler to remove the dead process's pooled sandbox",
        async () =>
          !(await sp.docker
            .getContainer(orphan.id)
            .inspect()
            .catch(() => undefined)),
        { timeoutMs: 15_000 },
      );
      expect((await sp.docker.getContainer(member.Id).inspect()).State.Running).toBe(true);
    } finally {
      stop();
      await cluster.leave();
      await sp.docker
        .getContainer(orphan.id)
        .remove({ force: true })
        .catch(() => {});
    }
  }, 400_000);

  it("a burst's extra members boot their agent when claimed: ready without it, and their session's prompt reaches it", async () => {
    // Three sessions back to back: a burst, which grows the pool past SVC_POOL_SIZE.
    const burst: string[] = [];
    for (let i = 0; i < 3; i++) burst.push((await sp.sessions("", "POST", {})).body.session_id);
    const staged = await readyMember("on-claim");
    for (const id of burst) await sp.sessions(`/${id}`, "DELETE");
    // No agent runtime runs in it: the boot and the warm-up a warm member costs were not spent ahead of demand.
    const opencode = async (id: string) =>
      (await execIn(sp.docker, id, ["sh", "-c", "pgrep -x opencode >/dev/null && echo up || echo none"])).out;
    expect(await opencode(staged.Id)).toContain("none");

    // The pool hands its warm members out first: sessions come until one is the staged member's.
    const sessionId = await waitFor(
      "a session on the staged member",
      async () => {
        const id = (await sp.sessions("", "POST", { prompt: CR_PROMPT })).body.session_id as string;
        if ((await containerOf(id))?.Id === staged.Id) return id;
        await sp.sessions(`/${id}`, "DELETE");
        return undefined;
      },
      { timeoutMs: 120_000, everyMs: 0 },
    );
    await running(sessionId);
    // Its first prompt went to the runtime the claim booted, with the session's token: the agent opened the CR.
    const cr = await waitFor(
      "the staged session's CR",
      async () => {
        const list = await call(sp.api.url, "GET", `/v1/projects/${sp.project.id}/change-requests?status=all`, {
          token: sp.user.token,
        });
        return list.body.change_requests?.find((c: { origin_session_id: string }) => c.origin_session_id === sessionId);
      },
      { timeoutMs: 120_000 },
    );
    expect(cr).toMatchObject({ title: "pooled", head_ref: sessionId });
    expect(await opencode(staged.Id)).toContain("up");
    await sp.sessions(`/${sessionId}`, "DELETE");
  }, 400_000);
});
