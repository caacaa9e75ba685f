import { execFileSync } from "node:child_process";
import { EventSourceParserStream } from "eventsource-parser/stream";
import type { SandboxDriver } from "../../orchestrator/sandbox/driver.ts";
import type { SandboxLinkMode } from "../../protocol/sandbox-link.ts";
import { call, seedUser, startApi } from "../harness/api-server.ts";
import { freshDatabase } from "../harness/databases.ts";
import { orchestratorFor, removeProjectContainers, requireDocker } from "../harness/docker.ts";
import { authedUrl, workRepo } from "../harness/git-fixture.ts";
import { freePort } from "../harness/ports.ts";
import { startScriptedLlm } from "../harness/scripted-llm.ts";
import { readyPoolMember } from "../harness/warm-pool.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const SESSIONS = 10;
const CR_PROMPT = "Add bench.txt and open a change request";
const ANSWERED = 5;

/**
 * What a person waits for after `svc sessions new`: the agent's answer to a first prompt. The events stream is
 * retried while the agent boots (503), as `svc sessions chat` does; the run ends at its `idle`.
 */
export async function firstAnswer(apiUrl: string, sessionPath: string, token: string): Promise<void> {
  const headers = { authorization: `Bearer ${token}` };
  const stop = new AbortController();
  let events: Response;
  for (;;) {
    events = await fetch(`${apiUrl}${sessionPath}/events`, { headers, signal: stop.signal });
    if (events.ok) break;
    await events.text();
    await new Promise((r) => setTimeout(r, 50));
  }
  const messages = events.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  let conversation: string | undefined;
  try {
    for await (const { data } of messages) {
      const event = JSON.parse(data) as { type: string; session?: string; message?: string };
      if (event.type === "ready") {
        const sent = await call(apiUrl, "POST", `${sessionPath}/messages`, { token, body: { text: "Say hello" } });
        conversation = sent.body.conversation;
      }
      if (event.session !== conversation) continue;
      if (event.type === "error") throw new Error(`the agent failed: ${event.message}`);
      if (event.type === "idle") return;
    }
  } finally {
    stop.abort();
  }
}

type Runs = { starts: number[]; answers: number[]; toCr: number[] };

/**
 * One API with the Docker orchestrator, a scripted model, a user and a project whose main holds one commit;
 * `poolSize` warm sandboxes per project (0: every session starts cold). `engine` swaps the driver and how the API
 * reaches sandboxes (the Swarm driver, dial-out links).
 */
export async function benchStack(
  poolSize: number,
  engine: { driver?: SandboxDriver; sandboxLink?: SandboxLinkMode } = {},
) {
  const db = await freshDatabase("pglite");
  const port = await freePort();
  const llm = await startScriptedLlm([
    { when: "Say hello", steps: [{ text: "Hello." }] },
    {
      when: CR_PROMPT,
      steps: [
        {
          tool: "bash",
          args: {
            command:
              "echo change > bench.txt && git add bench.txt && git commit -qm bench && git push -q origin HEAD && svc cr open --title bench",
            description: "commit, push and open a CR",
          },
        },
        { text: "Opened a change request." },
      ],
    },
  ]);
  const api = await startApi(db.sql, {
    host: "0.0.0.0",
    port,
    orchestrator: {
      ...orchestratorFor(port, {
        sessionCap: 100,
        poolSize,
        sandboxLink: engine.sandboxLink,
        llm: { baseUrl: llm.url, apiKey: "bench", model: "scripted" },
      }),
      ...(engine.driver && { driver: engine.driver }),
    },
  });
  const user = await seedUser(api.services);
  const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "bench" } })).body;
  const repo = await workRepo(authedUrl(project.repo_url, user.token));
  await repo.commit("initial", { "README.md": "bench\n" });
  await repo.push("main");
  const sessions = (suffix = "", method = "GET", body?: unknown) =>
    call(api.url, method, `/v1/projects/${project.id}/sessions${suffix}`, { token: user.token, body });
  const untilRunning = async (id: string) => {
    for (;;) {
      const s = (await sessions(`/${id}`)).body;
      if (s.status === "running") return id;
      if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const startOne = async () => untilRunning((await sessions("", "POST")).body.session_id);
  /** Create -> running; create -> the first answer; create with --prompt -> its CR opened. Removal is untimed. */
  async function measure(runs: number, answered: number, before?: () => Promise<unknown>): Promise<Runs> {
    const remove = (id: string) => sessions(`/${id}`, "DELETE");
    const starts = await timeRuns(runs, startOne, before, remove);
    const answers = await timeRuns(
      answered,
      async () => {
        const id = await startOne();
        await firstAnswer(api.url, `/v1/projects/${project.id}/sessions/${id}`, user.token);
        return id;
      },
      before,
      remove,
    );
    const toCr = await timeRuns(
      answered,
      async () => {
        const id = (await sessions("", "POST", { prompt: CR_PROMPT })).body.session_id as string;
        for (;;) {
          const crs = await call(api.url, "GET", `/v1/projects/${project.id}/change-requests?status=all`, {
            token: user.token,
          });
          if (crs.body.change_requests?.some((cr: { origin_session_id: string }) => cr.origin_session_id === id)) break;
          const s = (await sessions(`/${id}`)).body;
          if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        return id;
      },
      before,
      remove,
    );
    return { starts, answers, toCr };
  }
  return {
    api,
    db,
    llm,
    user,
    project,
    sessions,
    untilRunning,
    startOne,
    measure,
    async close() {
      await api.close();
      // Its sandboxes and its installation's network: a bench run leaves no address pool taken.
      await removeProjectContainers(await requireDocker(), project.id, api.services.installationId);
      await db.drop();
      llm.close();
    },
  };
}

const p50 = (samples: number[]) => percentile(samples, 50);

/**
 * Session create -> running with a cached image, against a bare `docker run --rm <image> true`; create -> the
 * agent's first answer and create --prompt -> CR opened (the real opencode, a scripted model); each from a cold
 * pool (none) and from a warm one (a ready pooled sandbox before each run).
 */
export async function benchSessionStart() {
  const docker = await requireDocker();
  const cold = await benchStack(0);
  let image: string;
  let rssMb: number;
  let coldRuns: Runs;
  try {
    const { sessions } = cold;
    const warm = await cold.startOne(); // builds (or finds) the image: not measured
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${warm}`] } });
    image = container!.Image;
    await new Promise((r) => setTimeout(r, 3000));
    const rss = execFileSync("docker", [
      "exec",
      container!.Id,
      "sh",
      "-c",
      "ps -o rss= -o args= | grep svc-agent.mjs | grep -v grep",
    ])
      .toString()
      .trim();
    rssMb = Number(rss.split(/\s+/)[0]) / 1024;
    await sessions(`/${warm}`, "DELETE");
    coldRuns = await cold.measure(SESSIONS, ANSWERED);
  } finally {
    await cold.close();
  }
  const bare = await timeRuns(SESSIONS, async () =>
    execFileSync("docker", ["run", "--rm", "--entrypoint", "true", image]),
  );

  const pooled = await benchStack(1);
  let warmRuns: Runs;
  try {
    await pooled.sessions(`/${await pooled.startOne()}`, "DELETE"); // the first session asks for the pool
    const ready = () =>
      readyPoolMember(
        docker,
        pooled.project.id,
        async (id) => (await pooled.sessions(`/${id}`)).status === 200,
        pooled.api.services.sandboxLinks.endpoint,
      );
    warmRuns = await pooled.measure(ANSWERED, ANSWERED, ready);
  } finally {
    await pooled.close();
  }

  const bareP50 = p50(bare);
  const ratio = (runs: Runs) => p50(runs.starts) / bareP50;
  const lines = (name: string, runs: Runs, target: boolean) => [
    `session create -> running, ${name} (cached image, ${runs.starts.length} runs): p50 ${ms(p50(runs.starts))} ms, p95 ${ms(percentile(runs.starts, 95))} ms | bare docker run --rm true p50 ${ms(bareP50)} ms | ratio ${ratio(runs).toFixed(2)}x${target ? " | target <= 1.0x" : ""}`,
    `session create -> first answer, ${name} (opencode, scripted model, ${runs.answers.length} runs): p50 ${ms(p50(runs.answers))} ms, p95 ${ms(percentile(runs.answers, 95))} ms`,
    `session with --prompt -> CR opened, ${name} (scripted model, ${runs.toCr.length} runs): p50 ${ms(p50(runs.toCr))} ms, p95 ${ms(percentile(runs.toCr, 95))} ms${target ? " | target p50 <= 5000 ms" : ""}`,
  ];
  return {
    ok: ratio(warmRuns) <= 1 && rssMb < 60 && p50(warmRuns.toCr) <= 5000,
    lines: [
      ...lines("cold pool", coldRuns, false),
      ...lines("warm pool", warmRuns, true),
      `warm pool vs cold: create -> running ${(p50(coldRuns.starts) / p50(warmRuns.starts)).toFixed(1)}x faster, prompt -> CR ${(p50(coldRuns.toCr) / p50(warmRuns.toCr)).toFixed(1)}x faster`,
      `idle svc-agent RSS: ${rssMb.toFixed(1)} MB (need < 60 MB)`,
    ],
  };
}
