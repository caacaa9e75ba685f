import { joinCluster } from "../../orchestrator/cluster.ts";
import { Transcript } from "../../protocol/transcript.ts";
import { call } from "../harness/api-server.ts";
import { benchStack, firstAnswer } from "./sandbox.ts";
import { ms, percentile, timeRuns } from "./stats.ts";

const RUNS = 3;

/**
 * A restarted session's first answer, its earlier conversation carried to the model, against a new session's first
 * answer in the same run: both start a cold sandbox (no pool), the restart also saves a checkpoint, restores the
 * transcript into the runtime and the model reads it.
 */
export async function benchResume() {
  const stack = await benchStack(0);
  const cluster = await joinCluster(stack.db.sql, { instanceId: stack.api.services.instanceId });
  const stopBackground = stack.api.services.startBackgroundWork({ cluster, idleMs: 3_600_000 });
  const { api, user, project } = stack;
  const path = (id: string) => `/v1/projects/${project.id}/sessions/${id}`;
  const remove = (id: string) => stack.sessions(`/${id}`, "DELETE");
  try {
    const fresh = await timeRuns(
      RUNS,
      async () => {
        const id = await stack.startOne();
        await firstAnswer(api.url, path(id), user.token);
        return id;
      },
      undefined,
      remove,
    );
    let talked = "";
    const resumed = await timeRuns(
      RUNS,
      async () => {
        const turns = stack.llm.turns().length;
        await stack.sessions(`/${talked}/restart`, "POST", {});
        await stack.untilRunning(talked);
        await firstAnswer(api.url, path(talked), user.token);
        const seen = stack.llm.turns().slice(turns).at(-1) ?? "";
        if (!seen.includes("restored from svc's transcript"))
          throw new Error("the restarted agent's model request lacked the earlier conversation");
        return talked;
      },
      // Untimed: a session with one exchange, stored.
      async () => {
        talked = await stack.startOne();
        await firstAnswer(api.url, path(talked), user.token);
        for (;;) {
          const entries = Transcript.parse(
            (await call(api.url, "GET", `${path(talked)}/transcript`, { token: user.token })).body,
          );
          if (entries.some((e) => e.role === "assistant")) break;
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      remove,
    );
    const p50 = (s: number[]) => percentile(s, 50);
    return {
      ok: true,
      line:
        `restart -> first answer carrying the earlier conversation: p50 ${ms(p50(resumed))} ms ` +
        `vs new session -> first answer ${ms(p50(fresh))} ms = ${(p50(resumed) / p50(fresh)).toFixed(2)}x (cold sandboxes, ${RUNS} runs each)`,
    };
  } finally {
    stopBackground();
    await stack.close();
  }
}
