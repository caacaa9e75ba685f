import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentEvent } from "../protocol/daemon.ts";
import type { RuntimeEvent } from "./agent-client.ts";
import { createEventTranslator } from "./agent-events.ts";

const SES = "ses_01";

/** opencode's event shapes, as its `/event` stream sends them (../shared/notes/opencode.md). */
const message = (id: string, role: "user" | "assistant"): RuntimeEvent => ({
  type: "message.updated",
  properties: { info: { id, sessionID: SES, role, time: { created: 1 } } },
});
const delta = (messageID: string, partID: string, text: string, field = "text"): RuntimeEvent => ({
  type: "message.part.delta",
  properties: { sessionID: SES, messageID, partID, field, delta: text },
});
const textPart = (messageID: string, id: string, text: string): RuntimeEvent => ({
  type: "message.part.updated",
  properties: { part: { id, sessionID: SES, messageID, type: "text", text } },
});
const toolPart = (messageID: string, id: string, state: Record<string, unknown>, tool = "bash"): RuntimeEvent => ({
  type: "message.part.updated",
  properties: { part: { id, sessionID: SES, messageID, type: "tool", callID: "call_1", tool, state } },
});

/** Feeds the events through one translator; every output must be a valid AgentEvent. */
function run(events: RuntimeEvent[]): AgentEvent[] {
  const translate = createEventTranslator();
  const out = events.flatMap((e) => translate(e));
  for (const event of out) expect(AgentEvent.parse(event)).toEqual(event);
  return out;
}

describe("createEventTranslator with entries (the API's transcript recorder)", () => {
  const entries = (events: RuntimeEvent[], clock: number[]) => {
    let i = 0;
    const translate = createEventTranslator({ entries: true, now: () => clock[Math.min(i, clock.length - 1)]! });
    return events.flatMap((e) => {
      const out = translate(e);
      i++;
      for (const event of out) expect(AgentEvent.parse(event)).toEqual(event);
      return out.flatMap((o) => (o.type === "entry" ? [o.entry] : []));
    });
  };

  it("reports a streaming text whole at most once a second, and again when it ends; never the user's", () => {
    const seen = entries(
      [
        message("msg_user", "user"),
        textPart("msg_user", "prt_u", "please fix the bug"),
        message("msg_a", "assistant"),
        delta("msg_a", "prt_1", "Hel"),
        delta("msg_a", "prt_1", "lo"),
        delta("msg_a", "prt_1", ", wor"),
        textPart("msg_a", "prt_1", "Hello, world"),
      ],
      [5000, 5000, 5000, 5000, 5500, 6200, 6300],
    );
    expect(seen.map((e) => [e.key, e.role, e.text])).toEqual([
      ["prt_1", "assistant", "Hel"],
      ["prt_1", "assistant", "Hello, wor"],
      ["prt_1", "assistant", "Hello, world"],
    ]);
    expect(seen[2]!.conversation).toBe(SES);
    expect(seen[2]!.at).toBe(new Date(5000).toISOString());
  });

  it("reports a tool call at each status with its input, its output or error, cut past 64 KiB", () => {
    const input = { command: "npm test", description: "Runs the tests" };
    const long = "x".repeat(64 * 1024 + 10);
    const seen = entries(
      [
        message("msg_a", "assistant"),
        toolPart("msg_a", "prt_t", { status: "pending", input: {}, raw: "" }),
        toolPart("msg_a", "prt_t", { status: "running", input, time: { start: 7000 } }),
        toolPart("msg_a", "prt_t", {
          status: "completed",
          input,
          output: long,
          title: "npm test",
          time: { start: 7000 },
        }),
        toolPart("msg_a", "prt_w", { status: "error", input: { filePath: "a.ts" }, error: "EACCES" }, "write"),
      ],
      [1],
    );
    expect(seen.map((e) => [e.role, e.text, e.tool?.name, e.tool?.status, e.tool?.output?.length ?? null])).toEqual([
      ["tool", "Runs the tests", "bash", "running", null],
      ["tool", "npm test", "bash", "completed", 64 * 1024],
      ["tool", "", "write", "error", 6],
    ]);
    expect(seen[1]!.tool).toMatchObject({ input, output_truncated: true });
    expect(seen[1]!.at).toBe(new Date(7000).toISOString());
    expect(seen[2]!.tool).toMatchObject({ output: "EACCES", output_truncated: false });
  });

  it("sends no entry events to a client that did not ask for them", () => {
    expect(run([message("msg_a", "assistant"), textPart("msg_a", "prt_1", "Hi")]).map((e) => e.type)).toEqual(["text"]);
  });
});

describe("createEventTranslator (opencode events -> AgentEvents)", () => {
  it("relays the assistant's text deltas and drops the user's own message", () => {
    expect(
      run([
        message("msg_user", "user"),
        textPart("msg_user", "prt_u", "please fix the bug"),
        delta("msg_user", "prt_u", "please"),
        message("msg_a", "assistant"),
        delta("msg_a", "prt_1", "Hel"),
        delta("msg_a", "prt_1", "lo"),
      ]),
    ).toEqual([
      { type: "text", session: SES, delta: "Hel" },
      { type: "text", session: SES, delta: "lo" },
    ]);
  });

  it("drops deltas of a message whose role is not known yet, and of fields other than text", () => {
    expect(
      run([delta("msg_a", "prt_1", "early"), message("msg_a", "assistant"), delta("msg_a", "prt_1", "x", "input")]),
    ).toEqual([]);
  });

  it("sends only what a whole-part update adds beyond the deltas already sent", () => {
    expect(
      run([
        message("msg_a", "assistant"),
        delta("msg_a", "prt_1", "Hello"),
        textPart("msg_a", "prt_1", "Hello"),
        textPart("msg_a", "prt_1", "Hello, world"),
        textPart("msg_a", "prt_1", "Hello, world"),
      ]),
    ).toEqual([
      { type: "text", session: SES, delta: "Hello" },
      { type: "text", session: SES, delta: ", world" },
    ]);
  });

  it("turns whole-part updates into deltas when a runtime sends only those, part by part", () => {
    expect(
      run([
        message("msg_a", "assistant"),
        textPart("msg_a", "prt_1", "One"),
        textPart("msg_a", "prt_2", "Two"),
        textPart("msg_a", "prt_1", "One more"),
      ]),
    ).toEqual([
      { type: "text", session: SES, delta: "One" },
      { type: "text", session: SES, delta: "Two" },
      { type: "text", session: SES, delta: " more" },
    ]);
  });

  it("reports each tool status change once, with the tool's title or its described input", () => {
    const input = { command: "npm test", description: "Runs the tests" };
    expect(
      run([
        message("msg_a", "assistant"),
        toolPart("msg_a", "prt_t", { status: "pending", input: {}, raw: "" }),
        toolPart("msg_a", "prt_t", { status: "running", input, time: { start: 1 } }),
        toolPart("msg_a", "prt_t", { status: "running", input, time: { start: 1 }, metadata: { output: "..." } }),
        toolPart("msg_a", "prt_t", { status: "completed", input, output: "ok", title: "npm test", time: {} }),
        toolPart("msg_a", "prt_w", { status: "running", input: { filePath: "a.ts" } }, "write"),
        toolPart("msg_a", "prt_w", { status: "error", input: { filePath: "a.ts" }, error: "EACCES" }, "write"),
      ]),
    ).toEqual([
      { type: "tool", session: SES, tool: "bash", status: "running", title: "Runs the tests" },
      { type: "tool", session: SES, tool: "bash", status: "completed", title: "npm test" },
      { type: "tool", session: SES, tool: "write", status: "running", title: null },
      { type: "tool", session: SES, tool: "write", status: "error", title: null },
    ]);
  });

  it("drops step markers and other part types", () => {
    const step = (type: string): RuntimeEvent => ({
      type: "message.part.updated",
      properties: { part: { id: `prt_${type}`, sessionID: SES, messageID: "msg_a", type } },
    });
    expect(run([message("msg_a", "assistant"), step("step-start"), step("reasoning"), step("step-finish")])).toEqual(
      [],
    );
  });

  it("marks a run's start once while busy and its end on idle, then again for the next run", () => {
    const status = (type: string): RuntimeEvent => ({
      type: "session.status",
      properties: { sessionID: SES, status: { type } },
    });
    const idle: RuntimeEvent = { type: "session.idle", properties: { sessionID: SES } };
    expect(run([status("busy"), status("busy"), status("idle"), idle, status("busy"), idle])).toEqual([
      { type: "busy", session: SES },
      { type: "idle", session: SES },
      { type: "busy", session: SES },
      { type: "idle", session: SES },
    ]);
  });

  it("reports an abort or a failed run as an error with the runtime's message", () => {
    const error = (properties: Record<string, unknown>): RuntimeEvent => ({ type: "session.error", properties });
    expect(
      run([
        error({
          sessionID: SES,
          error: { name: "MessageAbortedError", data: { message: "The operation was aborted." } },
        }),
        error({ sessionID: SES, error: { name: "ProviderAuthError", data: {} } }),
        error({ error: { name: "UnknownError", data: { message: "boom" } } }),
        error({ sessionID: SES }),
      ]),
    ).toEqual([
      { type: "error", session: SES, message: "The operation was aborted." },
      { type: "error", session: SES, message: "ProviderAuthError" },
      { type: "error", session: null, message: "boom" },
      { type: "error", session: SES, message: "the agent run failed" },
    ]);
  });

  it("drops bookkeeping events", () => {
    expect(
      run([
        { type: "server.connected", properties: {} },
        { type: "session.updated", properties: { info: { id: SES } } },
        { type: "file.edited", properties: { file: "a.ts" } },
        { type: "message.part.updated" },
      ]),
    ).toEqual([]);
  });

  it("keeps no state between translators: each client's stream starts fresh", () => {
    const first = createEventTranslator();
    first(message("msg_a", "assistant"));
    expect(first(textPart("msg_a", "prt_1", "Hi"))).toEqual([{ type: "text", session: SES, delta: "Hi" }]);
    expect(createEventTranslator()(textPart("msg_a", "prt_1", "Hi"))).toEqual([]);
  });

  it("names the gateway's refusal and its unreachable URL once per run, and aborts a run that would retry", () => {
    const aborted: string[] = [];
    const translate = createEventTranslator({
      gatewayUrl: "http://user:secret@host.docker.internal:9000/v1?key=k",
      abort: (session) => aborted.push(session),
    });
    const status = (type: string, extra: Record<string, unknown> = {}): RuntimeEvent => ({
      type: "session.status",
      properties: { sessionID: SES, status: { type, ...extra } },
    });
    const retry = (attempt: number) =>
      status("retry", {
        attempt,
        message: "Cannot connect to API: Unable to connect. Is the computer able to access the url?",
      });
    const unauthorized: RuntimeEvent = {
      type: "session.error",
      properties: {
        sessionID: SES,
        error: {
          name: "APIError",
          data: { message: "Incorrect API key provided", statusCode: 401, isRetryable: false },
        },
      },
    };
    const abortedError: RuntimeEvent = {
      type: "session.error",
      properties: { sessionID: SES, error: { name: "MessageAbortedError", data: { message: "Aborted" } } },
    };
    const idle: RuntimeEvent = { type: "session.idle", properties: { sessionID: SES } };
    const out = [
      status("busy"),
      retry(1),
      status("busy"),
      retry(2),
      abortedError,
      idle,
      status("busy"),
      unauthorized,
      idle,
    ].flatMap((e) => translate(e));
    for (const event of out) expect(AgentEvent.parse(event)).toEqual(event);
    expect(out).toEqual([
      { type: "busy", session: SES },
      {
        type: "error",
        session: SES,
        message:
          "the model gateway at http://host.docker.internal:9000/v1 cannot be reached (Cannot connect to API: Unable to connect. Is the computer able to access the url?)",
      },
      { type: "idle", session: SES },
      { type: "busy", session: SES },
      {
        type: "error",
        session: SES,
        message: "the model gateway refused the API key (401): Incorrect API key provided",
      },
      { type: "idle", session: SES },
    ]);
    expect(aborted).toEqual([SES]);
  });

  describe("a run that goes quiet (a gateway that sent a plain body's headers, then nothing)", () => {
    afterEach(() => vi.useRealTimers());
    const busy: RuntimeEvent = { type: "session.status", properties: { sessionID: SES, status: { type: "busy" } } };

    function quietTranslator() {
      vi.useFakeTimers();
      const told: AgentEvent[] = [];
      const aborted: string[] = [];
      const translate = createEventTranslator({
        gatewayUrl: "http://gateway.test/v1",
        modelTimeoutS: 5,
        onQuiet: (e) => told.push(e),
        abort: (s) => aborted.push(s),
      });
      return { translate, told, aborted };
    }

    it("fails the turn and aborts the run past the timeout, naming the gateway", () => {
      const { translate, told, aborted } = quietTranslator();
      translate(busy);
      vi.advanceTimersByTime(6_000);
      expect(told).toEqual([]);
      vi.advanceTimersByTime(1_500);
      expect(told).toEqual([
        {
          type: "error",
          session: SES,
          message: "the model gateway at http://gateway.test/v1 sent nothing for 5 s; the turn was stopped",
        },
      ]);
      expect(aborted).toEqual([SES]);
      // The abort's own error that follows is no news.
      expect(
        translate({ type: "session.error", properties: { sessionID: SES, error: { name: "MessageAbortedError" } } }),
      ).toEqual([]);
    });

    it("waits for nothing while a tool runs, and starts counting again when it ends; idle ends the watch", () => {
      const { translate, told } = quietTranslator();
      translate(busy);
      translate(message("msg_a", "assistant"));
      translate(toolPart("msg_a", "prt_t", { status: "running", input: { command: "npm test" } }));
      vi.advanceTimersByTime(60_000);
      expect(told).toEqual([]);
      translate(toolPart("msg_a", "prt_t", { status: "completed", input: { command: "npm test" } }));
      vi.advanceTimersByTime(6_000);
      translate(delta("msg_a", "prt_x", "done"));
      vi.advanceTimersByTime(6_000);
      expect(told).toEqual([]);
      translate({ type: "session.idle", properties: { sessionID: SES } });
      vi.advanceTimersByTime(60_000);
      expect(told).toEqual([]);
    });
  });
});
