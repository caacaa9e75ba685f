import type { ChildProcess } from "node:child_process";
import { createServer, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentEvent } from "../protocol/daemon.ts";
import { runtimeRunning, startDaemon } from "./support/daemon.ts";

const SERVICE_KEY = "svc_sk_test-service-key-0123456789abcdef";
const SESSION = "6f1c2d3e-0000-4000-8000-000000000028";
const OPENCODE = new URL("../node_modules/opencode-linux-x64/bin/opencode", import.meta.url).pathname;
/** SVC_MODEL_TIMEOUT_S for this daemon: below the stack setting's minimum (5), which the daemon's own reader allows. */
const TIMEOUT_S = 3;
/** What a reported stall may take beyond the timeout: opencode's step to the gateway and the daemon's abort. */
const SLACK_S = 4;

type Mode = "answer" | "silent" | "stall-after-chunk" | "json-headers-then-silent";

/**
 * A model gateway on loopback that answers like an OpenAI-compatible one (`answer`), or reads the request and then
 * sends nothing (`silent`), or sends 200 and the stream's first chunk and then nothing (`stall-after-chunk`), or
 * sends the headers of a plain JSON answer and then nothing (`json-headers-then-silent`: a proxy that buffers).
 */
async function startGateway() {
  let mode: Mode = "answer";
  const requests: Mode[] = [];
  const stalled = new Set<ServerResponse>();
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { tools?: unknown[] };
    requests.push(mode);
    const chunk = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    if (mode === "silent") {
      stalled.add(res);
      return;
    }
    if (mode === "json-headers-then-silent") {
      res.writeHead(200, { "content-type": "application/json" });
      res.flushHeaders();
      stalled.add(res);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (mode === "stall-after-chunk") {
      res.write(chunk({ role: "assistant", content: "Thinking" }));
      stalled.add(res);
      return;
    }
    res.write(chunk({ role: "assistant", content: body.tools?.length ? `answer ${requests.length}` : "title" }));
    res.write(chunk({}, "stop"));
    res.end("data: [DONE]\n\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`,
    setMode: (m: Mode) => {
      mode = m;
    },
    requests,
    close: () => {
      for (const res of stalled) res.destroy();
      server.close();
      server.closeAllConnections();
    },
  };
}

/** The daemon's /svc/events as a queue of AgentEvents, each with the time it arrived. */
async function followEvents(base: string) {
  const res = await fetch(`${base}/svc/events`, { headers: { authorization: `Bearer ${SERVICE_KEY}` } });
  expect(res.status).toBe(200);
  const events: { at: number; event: AgentEvent }[] = [];
  const reader = res.body!.getReader();
  void (async () => {
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) return;
      buffer += Buffer.from(value!).toString("utf8");
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const data = buffer
          .slice(0, end)
          .split("\n")
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trim())
          .join("\n");
        buffer = buffer.slice(end + 2);
        if (data) events.push({ at: Date.now(), event: AgentEvent.parse(JSON.parse(data)) });
        end = buffer.indexOf("\n\n");
      }
    }
  })();
  return { events, close: () => reader.cancel().catch(() => {}) };
}

describe("a model gateway that stalls (SVC_MODEL_TIMEOUT_S, real daemon and real opencode)", () => {
  let daemon: ChildProcess;
  let base: string;
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  let stream: Awaited<ReturnType<typeof followEvents>>;

  beforeAll(async () => {
    gateway = await startGateway();
    const started = await startDaemon({
      serviceKey: SERVICE_KEY,
      sessionId: SESSION,
      agentCommand: [],
      env: {
        SVC_AGENT_COMMAND: "", // the real agent runtime: opencode
        SVC_OPENCODE_BIN: OPENCODE,
        SVC_LLM_BASE_URL: gateway.url,
        SVC_LLM_API_KEY: "sk-test",
        SVC_AGENT_MODEL: "scripted",
        SVC_MODEL_TIMEOUT_S: String(TIMEOUT_S),
      },
    });
    daemon = started.child;
    base = started.base;
    await runtimeRunning(base, SERVICE_KEY);
    stream = await followEvents(base);
  });
  afterAll(async () => {
    await stream?.close();
    daemon?.kill("SIGTERM");
    gateway?.close();
  });

  /** Sends a message; resolves with the run's events (its `busy` to its `idle`) and when the prompt was sent. */
  async function turn(text: string, timeoutMs = 30_000) {
    const from = stream.events.length;
    const sentAt = Date.now();
    const res = await fetch(`${base}/svc/prompt`, {
      method: "POST",
      headers: { authorization: `Bearer ${SERVICE_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ text }),
    });
    expect(res.status).toBe(200);
    const { session } = (await res.json()) as { session: string };
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const mine = stream.events.slice(from).filter((e) => "session" in e.event && e.event.session === session);
      if (mine.some((e) => e.event.type === "idle")) return { sentAt, events: mine };
      if (Date.now() > deadline) throw new Error(`the turn did not end: ${JSON.stringify(mine.map((e) => e.event))}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  const texts = (events: { event: AgentEvent }[]) =>
    events.map((e) => (e.event.type === "text" ? e.event.delta : "")).join("");
  const errors = <T extends { event: AgentEvent }>(events: T[]) => events.filter((e) => e.event.type === "error");

  async function expectHealthyAndIdle(): Promise<void> {
    const health = await (await fetch(`${base}/svc/health`)).json();
    expect(health).toMatchObject({ status: "ok", busy: false, agent: { state: "running", restarts: 0 } });
  }

  it("answers normally first (and warms opencode up)", async () => {
    const { events } = await turn("hello", 60_000);
    expect(errors(events)).toEqual([]);
    expect(texts(events)).toMatch(/^answer \d+$/);
  });

  for (const mode of ["silent", "stall-after-chunk", "json-headers-then-silent"] as const) {
    it(`fails the turn of a gateway that goes ${mode} in ${TIMEOUT_S} s, naming it; the next message works`, async () => {
      gateway.setMode(mode);
      const before = gateway.requests.length;
      const stalledTurn = await turn(`stall please (${mode})`);
      const failed = errors(stalledTurn.events);
      expect(failed.map((e) => e.event)).toEqual([
        {
          type: "error",
          session: expect.any(String),
          message: `the model gateway at ${gateway.url} sent nothing for ${TIMEOUT_S} s; the turn was stopped`,
        },
      ]);
      const waited = (failed[0]!.at - stalledTurn.sentAt) / 1000;
      expect(waited).toBeGreaterThanOrEqual(TIMEOUT_S);
      expect(waited).toBeLessThan(TIMEOUT_S + SLACK_S);
      // The run was stopped at the first timeout: opencode did not go on retrying the stalled gateway.
      expect(gateway.requests.slice(before)).toEqual([mode]);
      await expectHealthyAndIdle();

      gateway.setMode("answer");
      const next = await turn("and now?");
      expect(errors(next.events)).toEqual([]);
      expect(texts(next.events)).toMatch(/^answer \d+$/);
      expect(gateway.requests.slice(before)).toEqual([mode, "answer"]);
      await expectHealthyAndIdle();
    });
  }
});
