import { EventSourceParserStream } from "eventsource-parser/stream";
import { AgentEvent } from "../../protocol/daemon.ts";
import type { Project } from "../../protocol/project.ts";
import { ApiError } from "../errors.ts";
import { sendMessage } from "../sessions/agent.ts";
import type { SessionService } from "../sessions/service.ts";
import type { TranscriptStore } from "../sessions/transcript-store.ts";

/** How one message's run ended: the agent's words, or why there are none. */
export type TurnOutcome = { answer: string } | { error: string };

export type SessionTurnDeps = {
  sessions: SessionService;
  transcripts: TranscriptStore;
  /** A new session's sandbox and agent start within this (the image may be building). */
  startupMs?: number;
  /** A run longer than this is given up on (the session carries on; the thread is told). */
  runMs?: number;
};

const STARTUP_MS = 5 * 60_000;
const RUN_MS = 30 * 60_000;
const RETRY_MS = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The session's status once it is no longer provisioning; a failure is thrown with its recorded reason. */
async function untilRunning(deps: SessionTurnDeps, project: Project, sessionId: string, deadline: number) {
  for (;;) {
    const session = await deps.sessions.get(project, sessionId);
    if (session.status === "running") return;
    if (session.status === "failed") throw new Error(`session ${sessionId} failed: ${session.error ?? "no reason"}`);
    if (session.status !== "provisioning") throw new Error(`session ${sessionId} is ${session.status}`);
    if (Date.now() > deadline) throw new Error(`session ${sessionId} did not start in time`);
    await sleep(RETRY_MS);
  }
}

/** The daemon's AgentEvents (its /svc/events), one at a time; `ready` already consumed. */
async function openEvents(
  deps: SessionTurnDeps,
  project: Project,
  sessionId: string,
  deadline: number,
  signal: AbortSignal,
) {
  for (;;) {
    const target = await deps.sessions.sandboxTarget(project, sessionId);
    const res = await fetch(`${target.url}/svc/events`, {
      headers: { authorization: `Bearer ${target.serviceKey}` },
      signal,
    }).catch((err: Error) => ({ ok: false, status: 0, body: null, statusText: err.message }) as const);
    if (res.ok && res.body) {
      const events = readEvents(res.body);
      const first = await events.next();
      if (!first.done && first.value.type === "ready") return events;
    } else {
      await res.body?.cancel();
    }
    // The agent runtime is still booting (503), or its stream is not there yet.
    if (Date.now() > deadline) throw new Error("the session's agent did not become ready in time");
    await sleep(RETRY_MS);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

async function* readEvents(body: ReadableStream<BufferSource>): AsyncGenerator<AgentEvent> {
  const messages = body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const { data } of messages) {
    const event = AgentEvent.safeParse(parseJson(data));
    if (event.success) yield event.data;
  }
}

/**
 * Sends `text` to the session's agent and waits for its run to end, listening before sending so that nothing of
 * the run is missed: the text of the run, or its error. A session still starting is waited for.
 */
export async function runTurn(
  deps: SessionTurnDeps,
  project: Project,
  sessionId: string,
  text: string,
): Promise<TurnOutcome> {
  const stop = new AbortController();
  const runDeadline = setTimeout(() => stop.abort(), deps.runMs ?? RUN_MS);
  try {
    const deadline = Date.now() + (deps.startupMs ?? STARTUP_MS);
    await untilRunning(deps, project, sessionId, deadline);
    const events = await openEvents(deps, project, sessionId, deadline, stop.signal);
    const conversation = await sendMessage(deps, project, sessionId, { text });
    let started = false;
    let answer = "";
    for await (const event of events) {
      // An egress refusal is the sandbox's, not the conversation's: the session's log and events have it.
      if (event.type === "ready" || event.type === "egress_refused" || event.session !== conversation) continue;
      if (event.type === "busy") started = true;
      if (!started) continue;
      if (event.type === "text") answer += event.delta;
      if (event.type === "idle") return { answer: answer.trim() || "(the agent finished without a written answer)" };
      if (event.type === "error") return { error: event.message };
    }
    return { error: "the session's event stream ended before the agent finished" };
  } catch (err) {
    if (stop.signal.aborted)
      return { error: "the agent is still working after a long time; follow it on the dashboard" };
    return { error: err instanceof ApiError ? err.message : (err as Error).message };
  } finally {
    clearTimeout(runDeadline);
    stop.abort();
  }
}
