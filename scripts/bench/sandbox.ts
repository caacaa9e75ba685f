import { execFileSync } from "node:child_process";
import { createSseReader } from "../../protocol/sse.ts";
import { call, seedUser, startApi } from "../harness/api-server.ts";
import { freshDatabase } from "../harness/databases.ts";
import { orchestratorFor, requireDocker } from "../harness/docker.ts";
import { authedUrl, workRepo } from "../harness/git-fixture.ts";
import { freePort } from "../harness/ports.ts";
import { startScriptedLlm } from "../harness/scripted-llm.ts";
import { benchPreview } from "./preview.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const SESSIONS = 10;
const CR_PROMPT = "Add bench.txt and open a change request";
const ANSWERED = 5;

/**
 * What a person waits for after `svc sessions new`: the agent's answer to a first prompt. The events stream is
 * retried while the agent boots (503), as `svc sessions chat` does; the run ends at its `idle`.
 */
async function firstAnswer(apiUrl: string, sessionPath: string, token: string): Promise<void> {
  const headers = { authorization: `Bearer ${token}` };
  const stop = new AbortController();
  let events: Response;
  for (;;) {
    events = await fetch(`${apiUrl}${sessionPath}/events`, { headers, signal: stop.signal });
    if (events.ok) break;
    await events.text();
    await new Promise((r) => setTimeout(r, 50));
  }
  const read = createSseReader();
  const decoder = new TextDecoder();
  let conversation: string | undefined;
  try {
    for await (const chunk of events.body as unknown as AsyncIterable<Uint8Array>) {
      for (const data of read(decoder.decode(chunk, { stream: true }))) {
        const event = JSON.parse(data) as { type: string; session?: string; message?: string };
        if (event.type === "ready") {
          const sent = await call(apiUrl, "POST", `${sessionPath}/messages`, { token, body: { text: "Say hello" } });
          conversation = sent.body.conversation;
        }
        if (event.session !== conversation) continue;
        if (event.type === "error") throw new Error(`the agent failed: ${event.message}`);
        if (event.type === "idle") return;
      }
    }
  } finally {
    stop.abort();
  }
}

/**
 * Session create -> running with a cached image, against a bare `docker run --rm <image> true`; and create -> the
 * agent's first answer (the real opencode, a scripted model), against create -> running.
 */
export async function benchSessionStart() {
  const docker = await requireDocker();
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
    orchestrator: orchestratorFor(port, {
      sessionCap: 100,
      llm: { baseUrl: llm.url, apiKey: "bench", model: "scripted" },
    }),
  });
  try {
    const user = await seedUser(api.services);
    const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "bench" } })).body;
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.commit("initial", { "README.md": "bench\n" });
    await repo.push("main");
    const sessions = (suffix = "", method = "GET") =>
      call(api.url, method, `/v1/projects/${project.id}/sessions${suffix}`, { token: user.token });
    const startOne = async () => {
      const created = (await sessions("", "POST")).body;
      for (;;) {
        const s = (await sessions(`/${created.session_id}`)).body;
        if (s.status === "running") return created.session_id as string;
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const warm = await startOne(); // builds (or finds) the image: not measured
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${warm}`] } });
    const image = container!.Image;
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
    const rssMb = Number(rss.split(/\s+/)[0]) / 1024;
    const target = await api.services.sessions!.sandboxTarget(project, warm);
    const preview = await benchPreview(
      docker,
      container!.Id,
      api.url,
      `/v1/projects/${project.id}/sessions/${warm}`,
      user.token,
      {
        ...target,
        userId: user.userId,
        projectId: project.id,
        sessionId: warm,
      },
    );
    await sessions(`/${warm}`, "DELETE");

    const bare = await timeRuns(SESSIONS, async () =>
      execFileSync("docker", ["run", "--rm", "--entrypoint", "true", image]),
    );
    const ids: string[] = [];
    const starts = await timeRuns(SESSIONS, async () => {
      const id = await startOne();
      ids.push(id);
      await sessions(`/${id}`, "DELETE");
    });
    const answers = await timeRuns(ANSWERED, async () => {
      const id = await startOne();
      await firstAnswer(api.url, `/v1/projects/${project.id}/sessions/${id}`, user.token);
      await sessions(`/${id}`, "DELETE");
    });
    const toCr = await timeRuns(ANSWERED, async () => {
      const created = await call(api.url, "POST", `/v1/projects/${project.id}/sessions`, {
        token: user.token,
        body: { prompt: CR_PROMPT },
      });
      const id = created.body.session_id as string;
      for (;;) {
        const crs = await call(api.url, "GET", `/v1/projects/${project.id}/change-requests?status=all`, {
          token: user.token,
        });
        if (crs.body.change_requests?.some((cr: { origin_session_id: string }) => cr.origin_session_id === id)) break;
        const s = (await sessions(`/${id}`)).body;
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await sessions(`/${id}`, "DELETE");
    });
    const ratio = percentile(starts, 50) / percentile(bare, 50);
    const answerRatio = percentile(answers, 50) / percentile(starts, 50);
    const crP50 = percentile(toCr, 50);
    return {
      ok: ratio <= 1 && rssMb < 60 && crP50 <= 5000 && preview.ok,
      lines: [
        `session create -> running (cached image, ${SESSIONS} runs): p50 ${ms(percentile(starts, 50))} ms, p95 ${ms(percentile(starts, 95))} ms | bare docker run --rm true p50 ${ms(percentile(bare, 50))} ms | ratio ${ratio.toFixed(2)}x | target <= 1.0x`,
        `session create -> first answer (opencode, scripted model, ${ANSWERED} runs): p50 ${ms(percentile(answers, 50))} ms, p95 ${ms(percentile(answers, 95))} ms | ratio to create -> running ${answerRatio.toFixed(2)}x`,
        `session with --prompt -> CR opened (scripted model, ${ANSWERED} runs): p50 ${ms(crP50)} ms, p95 ${ms(percentile(toCr, 95))} ms = ${(crP50 / percentile(starts, 50)).toFixed(1)}x create -> running | target p50 <= 5000 ms`,
        `idle svc-agent RSS: ${rssMb.toFixed(1)} MB (need < 60 MB)`,
        preview.line,
      ],
    };
  } finally {
    await api.close();
    await db.drop();
    llm.close();
  }
}
