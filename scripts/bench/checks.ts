import { joinCluster } from "../../orchestrator/cluster.ts";
import { call } from "../harness/api-server.ts";
import { requireDocker } from "../harness/docker.ts";
import { authedUrl, type WorkRepo, workRepo } from "../harness/git-fixture.ts";
import { readyPoolMember } from "../harness/warm-pool.ts";
import { benchStack } from "./sandbox.ts";
import { ms, percentile } from "./stats.ts";

const RUNS = 5;
const QUEUED = 3;
const STARTED = "check started";
const MANIFEST = `[[checks]]\nname = "bench"\nrun = "echo ${STARTED}; test ! -f broken"\ntimeout = 120\n`;

type Stack = Awaited<ReturnType<typeof benchStack>>;

/**
 * CR checks with a warm pool: a pushed head until its check's command prints (p50 against session create ->
 * running, same run), and the merge queue's time for N green CRs against a person merging the same CRs as soon as
 * each one's checks pass.
 */
export async function benchChecks() {
  const stack = await benchStack(2);
  const cluster = await joinCluster(stack.db.sql, { instanceId: stack.api.services.instanceId });
  const stopBackground = stack.api.services.startBackgroundWork({ cluster, idleMs: 3_600_000 });
  const docker = await requireDocker();
  const { api, user, project } = stack;
  const crs = `/v1/projects/${project.id}/change-requests`;
  const cr = (path: string, method = "GET", body?: unknown) =>
    call(api.url, method, `${crs}${path}`, { token: user.token, body });
  const taken = async (id: string) => (await stack.sessions(`/${id}`)).status === 200;
  const warmPool = () => readyPoolMember(docker, project.id, taken, api.services.sandboxLinks.endpoint);
  try {
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("main", { create: true, from: "origin/main" });
    await repo.commit("checks", { "svc.toml": MANIFEST });
    await repo.push("HEAD:refs/heads/land-checks");
    const land = await cr("", "POST", { title: "checks", head_ref: "land-checks" });
    await cr(`/${land.body.number}/merge`, "POST", {});
    // A session makes the project's pool (demand), and tells what a session start costs here.
    await stack.sessions(`/${await stack.startOne()}`, "DELETE");
    const sessionStarts: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await warmPool();
      const t0 = performance.now();
      const id = await stack.startOne();
      sessionStarts.push(performance.now() - t0);
      await stack.sessions(`/${id}`, "DELETE");
    }

    const n = await open(stack, repo, "timed", true);
    const starts: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await warmPool();
      const head = await repo.commit(`push ${i}`, { "run.txt": `${i}\n` });
      const t0 = performance.now();
      await repo.push("HEAD:refs/heads/timed");
      await until(async () => {
        const runs = (await cr(`/${n}/checks`)).body as { head_sha: string; log: string }[];
        return runs.some((r) => r.head_sha === head && r.log.includes(STARTED));
      });
      starts.push(performance.now() - t0);
    }
    await cr(`/${n}/close`, "POST", {});

    const queueMs = await mergeAll(stack, repo, "queued", async (numbers) => {
      for (const m of numbers) await cr(`/${m}/merge`, "POST", { auto: true });
      await until(async () => {
        const all = await Promise.all(numbers.map((m) => cr(`/${m}`)));
        return all.every((r) => r.body.change_request.status === "merged");
      });
    });
    const handMs = await mergeAll(stack, repo, "by-hand", async (numbers) => {
      for (const m of numbers) {
        await until(async () => (await cr(`/${m}`)).body.change_request.checks_status === "passed");
        const merged = await cr(`/${m}/merge`, "POST", {});
        if (merged.status !== 200) throw new Error(`merge of #${m}: ${JSON.stringify(merged.body)}`);
      }
    });
    const p50 = percentile(starts, 50);
    const session = percentile(sessionStarts, 50);
    return {
      ok: p50 < 2000,
      lines: [
        `pushed head -> its check running: p50 ${ms(p50)} ms (target < 2000) vs session create -> running ` +
          `${ms(session)} ms = ${(p50 / session).toFixed(2)}x (warm pool, ${RUNS} runs)`,
        `merge queue, ${QUEUED} green CRs into one base: ${ms(queueMs)} ms vs merging each by hand once green ` +
          `${ms(handMs)} ms = ${(queueMs / handMs).toFixed(2)}x`,
      ],
    };
  } finally {
    stopBackground();
    await stack.close();
  }
}

/** A branch from main with one commit, pushed, and its CR opened; its number. */
async function open(stack: Stack, repo: WorkRepo, branch: string, empty = false): Promise<number> {
  await repo.git(["fetch", "-q", "origin", "main"]);
  await repo.checkout(branch, { create: true, from: "origin/main" });
  if (!empty) await repo.commit(branch, { [`${branch}.txt`]: `${branch}\n` });
  await repo.push(`HEAD:refs/heads/${branch}`);
  const opened = await call(stack.api.url, "POST", `/v1/projects/${stack.project.id}/change-requests`, {
    token: stack.user.token,
    body: { title: branch, head_ref: branch },
  });
  return opened.body.number;
}

/** Opens QUEUED CRs of distinct files from main, then times `merge` of them all. */
async function mergeAll(stack: Stack, repo: WorkRepo, prefix: string, merge: (numbers: number[]) => Promise<void>) {
  const numbers: number[] = [];
  for (let i = 0; i < QUEUED; i++) numbers.push(await open(stack, repo, `${prefix}-${i}`));
  const t0 = performance.now();
  await merge(numbers);
  return performance.now() - t0;
}

async function until(done: () => Promise<boolean>, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}
