import { createParser } from "eventsource-parser";
import { whileLeading } from "../../orchestrator/cluster.ts";
import { AgentEvent } from "../../protocol/daemon.ts";
import { type RuntimeEntry, RuntimeTranscript } from "../../protocol/transcript.ts";
import type { Events } from "../events.ts";
import type { SessionStore } from "./store.ts";
import type { TranscriptStore } from "./transcript-store.ts";

/** A running sandbox the recorder follows: its daemon and the key that opens it. */
export type RecordedSandbox = { sandboxId: string; sessionId: string; url: string; serviceKey: string };

export type TranscriptRecorderDeps = {
  /** The sandboxes of running sessions now, with their daemon's address and service key. */
  running(): Promise<RecordedSandbox[]>;
  transcripts: TranscriptStore;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

const READ_TIMEOUT_MS = 15_000;
/** How often the leader looks for sandboxes to follow; a session that starts in this process is followed at once. */
const SWEEP_MS = 2000;

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/**
 * Stores what the agents of running sessions say and do, as their daemons report it (`/svc/events?entries=1`). Run
 * by the leading API process (whileLeading); `sweep` follows each running sandbox once and lets go of those that
 * stopped. On every (re)connection the runtime's whole conversation is read again (`/svc/transcript`), so nothing
 * said while no recorder listened (the API restarted, the lead moved) is missing. Writes are upserts by part: two
 * recorders, or one that reconnected, store each part once.
 */
export function createTranscriptRecorder(deps: TranscriptRecorderDeps) {
  const following = new Map<string, AbortController>();

  /** One writer per sandbox: parts reported while a write runs are merged into the next one (the newest wins). */
  function writerFor(sessionId: string) {
    let pending = new Map<string, RuntimeEntry>();
    let writing: Promise<void> | undefined;
    const flush = async (): Promise<void> => {
      while (pending.size > 0) {
        const batch = [...pending.values()];
        pending = new Map();
        await deps.transcripts
          .upsertRuntime(sessionId, batch)
          .catch((err) => deps.log("transcript write failed", { session: sessionId, error: String(err) }));
      }
    };
    const kick = (): Promise<void> => {
      writing ??= flush().finally(() => {
        writing = undefined;
        if (pending.size > 0) void kick();
      });
      return writing;
    };
    return (entries: RuntimeEntry[]) => {
      for (const e of entries) pending.set(e.key, e);
      return kick();
    };
  }

  async function follow(sandbox: RecordedSandbox, stop: AbortController): Promise<void> {
    const headers = { authorization: `Bearer ${sandbox.serviceKey}` };
    const write = writerFor(sandbox.sessionId);
    const res = await fetch(`${sandbox.url}/svc/events?entries=1`, { headers, signal: stop.signal });
    // Its agent still booting: the next sweep tries again.
    if (res.status === 503) return;
    if (!res.ok || !res.body) throw new Error(`the sandbox's daemon answered ${res.status} to its event stream`);
    /** The runtime's own record of its conversations (one of them, at a run's end): what the stream may have missed. */
    const reread = async (conversation?: string) => {
      const query = conversation ? `?conversation=${encodeURIComponent(conversation)}` : "";
      const whole = await fetch(`${sandbox.url}/svc/transcript${query}`, {
        headers,
        signal: AbortSignal.any([stop.signal, AbortSignal.timeout(READ_TIMEOUT_MS)]),
      });
      if (whole.ok) await write(RuntimeTranscript.parse(await whole.json()).entries);
    };
    const parser = createParser({
      onEvent: ({ data }) => {
        const event = AgentEvent.safeParse(parseJson(data));
        if (!event.success) return;
        if (event.data.type === "entry") void write([event.data.entry]);
        // A run that began before this stream connected sent parts it could not tell apart: its end settles them.
        if (event.data.type === "idle") void reread(event.data.session).catch(() => {});
      },
    });
    // Subscribed first, then the whole conversation: a part reported in between comes by both, stored once.
    await reread();
    const decoder = new TextDecoder();
    for await (const chunk of res.body) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
    await write([]);
  }

  return {
    /** Follows every running sandbox not followed yet; lets go of the rest. */
    async sweep(): Promise<void> {
      const running = await deps.running();
      const ids = new Set(running.map((s) => s.sandboxId));
      for (const [id, stop] of following) {
        if (!ids.has(id)) {
          stop.abort();
          following.delete(id);
        }
      }
      for (const sandbox of running) {
        if (following.has(sandbox.sandboxId)) continue;
        const stop = new AbortController();
        following.set(sandbox.sandboxId, stop);
        void follow(sandbox, stop)
          .catch((err: Error) => {
            if (!stop.signal.aborted)
              deps.log("transcript recorder lost a sandbox", { session: sandbox.sessionId, error: err.message });
          })
          // Gone (stopped, restarting, unreachable): the next sweep follows it again if it still runs.
          .finally(() => {
            if (following.get(sandbox.sandboxId) === stop) following.delete(sandbox.sandboxId);
          });
      }
    },

    /** Lets go of every sandbox (the lead moved, the server stops). */
    stop(): void {
      for (const stop of following.values()) stop.abort();
      following.clear();
    },
  };
}

export type TranscriptRecorder = ReturnType<typeof createTranscriptRecorder>;

/**
 * The recorder as the API runs it: on the leading process, over the sessions' sandbox rows, woken by a session that
 * starts running. Without the secrets key no sandbox can be opened, and nothing is recorded. Returns the stop.
 */
export function recordTranscripts(deps: {
  lead: () => Promise<boolean>;
  sessions: Pick<SessionStore, "liveSandboxes" | "sealedServiceKey">;
  openServiceKey: ((sealed: string) => string) | undefined;
  transcripts: TranscriptStore;
  events: Events;
  log: TranscriptRecorderDeps["log"];
}): () => void {
  const { sessions, openServiceKey } = deps;
  const recorder = createTranscriptRecorder({
    transcripts: deps.transcripts,
    log: deps.log,
    async running() {
      if (!openServiceKey) return [];
      const live = (await sessions.liveSandboxes()).filter((s) => s.status === "active" && s.url);
      const keyed = await Promise.all(
        live.map(async (s) => {
          const sealed = await sessions.sealedServiceKey(s.sandbox_id);
          if (!sealed) return [];
          return [
            { sandboxId: s.sandbox_id, sessionId: s.session_id, url: s.url!, serviceKey: openServiceKey(sealed) },
          ];
        }),
      );
      return keyed.flat();
    },
  });
  const tick = whileLeading({
    lead: deps.lead,
    name: "transcript recorder",
    log: deps.log,
    tick: recorder.sweep,
    stop: recorder.stop,
  });
  const timer = setInterval(tick, SWEEP_MS);
  const off = deps.events.on("session.changed", ({ status }) => {
    if (status === "running") void tick();
  });
  return () => {
    clearInterval(timer);
    off();
    recorder.stop();
  };
}
