import { get, type ServerResponse } from "node:http";
import { createParser } from "eventsource-parser";
import type { AgentEvent } from "../protocol/daemon.ts";
import type { RuntimeEvent } from "./agent-client.ts";
import { daemonError, sendError } from "./errors.ts";
import { modelFailure, stalled } from "./model-failure.ts";
import { SSE_HEADERS, SSE_PING, sseEvent } from "./sse.ts";
import { entryOfPart, type RuntimePart } from "./transcript.ts";

const TOOL_STATUSES = new Set(["running", "completed", "error"]);
/** A streaming text is reported to the recorder at most this often, and once more when it ends. */
const ENTRY_EVERY_MS = 1000;
const MAX_TRACKED = 10_000;
const PING_MS = 15_000;
/** Past SVC_MODEL_TIMEOUT_S, so that opencode's own timeouts, which name what stalled, report first when they can. */
const QUIET_SLACK_MS = 2000;

export type TranslatorOptions = {
  /** The model gateway's URL, named in the error when it cannot be reached or sends nothing. */
  gatewayUrl?: string;
  /** Seconds the gateway may send nothing before the turn fails (SVC_MODEL_TIMEOUT_S), named in that error. */
  modelTimeoutS?: number;
  /** The daemon's log: a gateway failure's raw words from the runtime go there, the person gets the clear ones. */
  log?: (msg: string) => void;
  /** Stops a run the gateway failed (opencode would retry an unreachable gateway for minutes). */
  abort?: (session: string) => void;
  /**
   * Told of a run that went quiet: busy, no tool running, and no event for longer than `modelTimeoutS`. That is a
   * gateway that answered the headers of a plain (not event-stream) body and then nothing, which opencode's own
   * timeouts do not see; the run is aborted and this error is the turn's end.
   */
  onQuiet?: (error: AgentEvent) => void;
  /** Also `entry` events: each part of the conversation, whole, as it changes (the API's transcript recorder). */
  entries?: boolean;
  now?: () => number;
};

/** Subscribes to the daemon's own events (an egress refusal) for one client; returns the unsubscribe. */
export type NoticeSource = (notify: (event: AgentEvent) => void) => () => void;

/**
 * Turns the runtime's events into svc's AgentEvents: the start of a run, the assistant's text as deltas (from
 * delta events, or from whole-part updates when a runtime sends only those), each tool's status once per change,
 * the end of a run, and errors (the model gateway's in the person's terms, once per run). The user's own
 * messages, step markers and bookkeeping events are dropped.
 */
export function createEventTranslator(options: TranslatorOptions = {}) {
  const roles = new Map<string, string>();
  const sent = new Map<string, number>();
  const toolStatus = new Map<string, string>();
  const busySessions = new Set<string>();
  const failedSessions = new Set<string>();
  /** Per busy session: its tools running now, and the timer that fires when it has been quiet too long. */
  const runningTools = new Map<string, Set<string>>();
  const quietTimers = new Map<string, NodeJS.Timeout>();
  /** Per streaming text part, for `entries`: its text so far, when it began, when it was last reported. */
  const texts = new Map<string, { part: RuntimePart; text: string; firstAt: number; reportedAt: number }>();
  const now = options.now ?? Date.now;

  /** The part's entry event, when the recorder asked for them and the part makes one. */
  function entryEvent(part: RuntimePart, text?: string): AgentEvent[] {
    if (!options.entries) return [];
    const seen = texts.get(part.id);
    const entry = entryOfPart(part, seen?.firstAt ?? now(), text ?? part.text);
    if (!entry) return [];
    if (seen) seen.reportedAt = now();
    return [{ type: "entry", session: part.sessionID, entry }];
  }

  /** A text part grew by `delta`: its whole text so far goes to the recorder at most once a second. */
  function textGrew(part: RuntimePart, delta: string): AgentEvent[] {
    if (!options.entries) return [];
    const seen = texts.get(part.id) ?? { part, text: "", firstAt: now(), reportedAt: 0 };
    texts.set(part.id, seen);
    seen.text += delta;
    return now() - seen.reportedAt >= ENTRY_EVERY_MS ? entryEvent(part, seen.text) : [];
  }

  const fail = (session: string, message: string, raw: string, abort: boolean): AgentEvent => {
    failedSessions.add(session);
    options.log?.(`model gateway failure in ${session}: ${raw}`);
    if (abort) options.abort?.(session);
    return { type: "error", session, message };
  };

  /** Starts the session's quiet timer over; none while a tool runs (a long build is not a stalled gateway). */
  function heard(session: string): void {
    clearTimeout(quietTimers.get(session));
    quietTimers.delete(session);
    const { modelTimeoutS, onQuiet } = options;
    if (!modelTimeoutS || !onQuiet || !busySessions.has(session) || failedSessions.has(session)) return;
    if ((runningTools.get(session)?.size ?? 0) > 0) return;
    const timer = setTimeout(
      () => {
        quietTimers.delete(session);
        if (!busySessions.has(session) || failedSessions.has(session)) return;
        const message = stalled(options.gatewayUrl, modelTimeoutS);
        onQuiet(fail(session, message, `no event for ${modelTimeoutS} s while waiting for the model`, true));
      },
      modelTimeoutS * 1000 + QUIET_SLACK_MS,
    );
    timer.unref();
    quietTimers.set(session, timer);
  }

  function toolChanged(session: string, part: string, status: string): void {
    const running = runningTools.get(session) ?? new Set<string>();
    runningTools.set(session, running);
    if (status === "running") running.add(part);
    else running.delete(part);
  }

  const forgetIfLarge = () => {
    if (roles.size + sent.size + toolStatus.size + texts.size > MAX_TRACKED) {
      texts.clear();
      roles.clear();
      sent.clear();
      toolStatus.clear();
    }
  };

  function translate(event: RuntimeEvent): AgentEvent[] {
    const events = translateOne(event);
    const session = event.properties?.sessionID ?? (event.properties?.part as RuntimePart | undefined)?.sessionID;
    if (typeof session === "string") heard(session);
    return events;
  }

  function translateOne(event: RuntimeEvent): AgentEvent[] {
    const p = event.properties ?? {};
    const failure = modelFailure(event, options.gatewayUrl, options.modelTimeoutS);
    if (failure) {
      if (failedSessions.has(failure.session)) return [];
      return [fail(failure.session, failure.message, failure.raw, failure.abort)];
    }
    switch (event.type) {
      case "message.updated": {
        const info = p.info as { id?: string; role?: string } | undefined;
        if (info?.id && info.role) roles.set(info.id, info.role);
        forgetIfLarge();
        return [];
      }
      case "message.part.delta": {
        if (p.field !== "text" || typeof p.delta !== "string" || roles.get(String(p.messageID)) !== "assistant")
          return [];
        const partId = String(p.partID);
        sent.set(partId, (sent.get(partId) ?? 0) + p.delta.length);
        const part = { id: partId, messageID: String(p.messageID), sessionID: String(p.sessionID), type: "text" };
        return [{ type: "text", session: String(p.sessionID), delta: p.delta }, ...textGrew(part, p.delta)];
      }
      case "message.part.updated": {
        const part = p.part as RuntimePart | undefined;
        const role = part && roles.get(part.messageID);
        // Only the assistant calls tools: a tool part is its even when this stream joined after its message began.
        if (!part || (role !== "assistant" && !(role === undefined && part.type === "tool"))) return [];
        if (part.type === "text" && typeof part.text === "string") {
          const already = sent.get(part.id) ?? 0;
          // The whole text: what the recorder stores, even when no delta is new (the part's end).
          const entry = entryEvent(part);
          if (part.text.length <= already) return entry;
          sent.set(part.id, part.text.length);
          return [{ type: "text", session: part.sessionID, delta: part.text.slice(already) }, ...entry];
        }
        const status = part.state?.status;
        if (part.type !== "tool" || !status || !TOOL_STATUSES.has(status) || toolStatus.get(part.id) === status)
          return [];
        toolStatus.set(part.id, status);
        toolChanged(part.sessionID, part.id, status);
        const title = part.state?.title ?? (part.state?.input?.description as string | undefined) ?? null;
        return [
          {
            type: "tool",
            session: part.sessionID,
            tool: part.tool ?? "tool",
            status: status as "running" | "completed" | "error",
            title,
          },
          ...entryEvent(part),
        ];
      }
      case "session.status": {
        const session = String(p.sessionID);
        const busy = (p.status as { type?: string } | undefined)?.type === "busy";
        if (!busy || busySessions.has(session)) return [];
        busySessions.add(session);
        return [{ type: "busy", session }];
      }
      case "session.idle":
        busySessions.delete(String(p.sessionID));
        failedSessions.delete(String(p.sessionID));
        runningTools.delete(String(p.sessionID));
        return [{ type: "idle", session: String(p.sessionID) }];
      case "session.error": {
        // The abort that follows a gateway failure already reported is no news.
        if (failedSessions.has(String(p.sessionID))) return [];
        const error = p.error as { name?: string; data?: { message?: string } } | undefined;
        const message = error?.data?.message ?? error?.name ?? "the agent run failed";
        return [{ type: "error", session: p.sessionID ? String(p.sessionID) : null, message }];
      }
      default:
        return [];
    }
  }

  /** Stops every quiet timer: the client went. */
  translate.close = () => {
    for (const timer of quietTimers.values()) clearTimeout(timer);
    quietTimers.clear();
  };
  return translate;
}

/**
 * Starts a client's event stream: `ready`, then the sandbox's notices as they come, and a comment line every 15 s
 * that keeps idle proxies from closing it. Returns the writer for further events; both stop when the client goes.
 * Alone, it is the stream of a sandbox whose runtime could run nothing (no model): no runtime boots for it.
 */
export function openEventStream(res: ServerResponse, notices: NoticeSource | undefined) {
  const write = (event: AgentEvent) => res.write(sseEvent(event));
  res.writeHead(200, SSE_HEADERS);
  write({ type: "ready" });
  const unsubscribe = notices?.(write) ?? (() => {});
  const ping = setInterval(() => res.write(SSE_PING), PING_MS);
  res.on("close", () => {
    clearInterval(ping);
    unsubscribe();
  });
  return write;
}

/**
 * GET /svc/events: subscribes to the runtime's event stream for this client and relays it translated, as
 * server-sent events (openEventStream), until either side goes.
 */
export function relayAgentEvents(
  res: ServerResponse,
  agentPort: number,
  directory: string,
  options: TranslatorOptions & { notices?: NoticeSource } = {},
) {
  let write: (event: AgentEvent) => void = () => {};
  const translate = createEventTranslator({ ...options, onQuiet: (event) => write(event) });
  const upstream = get(
    { host: "127.0.0.1", port: agentPort, path: `/event?directory=${encodeURIComponent(directory)}` },
    (runtime) => {
      if (runtime.statusCode !== 200) {
        runtime.resume();
        const message = `the agent runtime answered ${runtime.statusCode} to its event stream`;
        sendError(res, daemonError("UPSTREAM_UNAVAILABLE", message));
        return;
      }
      write = openEventStream(res, options.notices);
      const parser = createParser({
        onEvent: ({ data }) => {
          try {
            for (const event of translate(JSON.parse(data) as RuntimeEvent)) write(event);
          } catch {
            // Not JSON: nothing a client could use.
          }
        },
      });
      runtime.setEncoding("utf8");
      runtime.on("data", (chunk: string) => parser.feed(chunk));
      runtime.on("end", () => res.end());
    },
  );
  upstream.on("error", (err) => {
    if (!res.headersSent)
      sendError(res, daemonError("AGENT_RUNTIME_UNAVAILABLE", `the agent runtime is not reachable: ${err.message}`));
    else res.end();
  });
  res.on("close", () => {
    translate.close();
    upstream.destroy();
  });
}
