import { describe, expect, it } from "vitest";
import type { RuntimeEvent } from "./agent-client.ts";
import { createEventTranslator } from "./agent-events.ts";
import { loadDaemonConfig } from "./config.ts";
import { modelFailure } from "./model-failure.ts";
import { opencodeConfig } from "./opencode.ts";

const SES = "ses_01";
const GATEWAY = "http://user:secret@gw.internal:9000/v1/?key=k";
/** opencode's events for a stalled gateway, as 1.18.33 sends them (observed against a stalling server). */
const retry = (message: string): RuntimeEvent => ({
  type: "session.status",
  properties: { sessionID: SES, status: { type: "retry", attempt: 1, message, next: 0 } },
});
const HEADERS = "Provider response headers timed out after 120000ms";
const STREAM = "SSE read timed out";

describe("a model gateway that sends nothing (SVC_MODEL_TIMEOUT_S)", () => {
  it("is a failure at opencode's first retry, named by URL without credentials and the seconds, and aborted", () => {
    for (const raw of [HEADERS, STREAM]) {
      expect(modelFailure(retry(raw), GATEWAY, 120)).toEqual({
        session: SES,
        message: "the model gateway at http://gw.internal:9000/v1 sent nothing for 120 s; the turn was stopped",
        abort: true,
        raw,
      });
    }
    // Without the setting (the health check's sweep), the seconds come from opencode's words when they say.
    expect(modelFailure(retry(HEADERS), undefined)?.message).toContain("sent nothing for 120 s");
    expect(modelFailure(retry(STREAM), undefined)).toMatchObject({ abort: true });
  });

  it("is reported without an abort when opencode ends the run with it", () => {
    const event = {
      type: "session.error",
      properties: { sessionID: SES, error: { name: "APIError", data: { message: STREAM, isRetryable: true } } },
    };
    expect(modelFailure(event, GATEWAY, 30)).toMatchObject({ abort: false, message: expect.stringContaining("30 s") });
  });

  it("reaches the client once, with the clear words; the raw ones go to the log; the abort's own error is dropped", () => {
    const logged: string[] = [];
    const aborted: string[] = [];
    const translate = createEventTranslator({
      gatewayUrl: GATEWAY,
      modelTimeoutS: 7,
      log: (m) => logged.push(m),
      abort: (s) => aborted.push(s),
    });
    const out = [
      retry(HEADERS.replace("120000", "7000")),
      retry(HEADERS.replace("120000", "7000")),
      {
        type: "session.error",
        properties: { sessionID: SES, error: { name: "MessageAbortedError", data: { message: "Aborted" } } },
      },
      { type: "session.idle", properties: { sessionID: SES } },
    ].flatMap((e) => translate(e));
    expect(out).toEqual([
      {
        type: "error",
        session: SES,
        message: "the model gateway at http://gw.internal:9000/v1 sent nothing for 7 s; the turn was stopped",
      },
      { type: "idle", session: SES },
    ]);
    expect(aborted).toEqual([SES]);
    expect(logged).toEqual([`model gateway failure in ${SES}: Provider response headers timed out after 7000ms`]);
  });

  it("is opencode's header and chunk timeout for the gateway; the daemon reads it, 120 s by default", () => {
    const config = (env: Record<string, string> = {}) =>
      loadDaemonConfig({ SVC_TOKEN: "k".repeat(32), SVC_LLM_BASE_URL: "http://gw:9000/v1", ...env });
    expect(config().llm.timeoutS).toBe(120);
    expect(opencodeConfig(config({ SVC_MODEL_TIMEOUT_S: "45" }))).toMatchObject({
      provider: { svc: { options: { headerTimeout: 45_000, chunkTimeout: 45_000 } } },
    });
    expect(() => config({ SVC_MODEL_TIMEOUT_S: "0" })).toThrow(/SVC_MODEL_TIMEOUT_S/);
    expect(() => config({ SVC_MODEL_TIMEOUT_S: "soon" })).toThrow(/SVC_MODEL_TIMEOUT_S/);
  });
});
