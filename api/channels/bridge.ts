import type { ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { Channel, SlackEnvelope, SlackMessageEvent } from "../../protocol/channel.ts";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { Project } from "../../protocol/project.ts";
import type { AccountStore } from "../accounts/store.ts";
import { ApiError } from "../errors.ts";
import type { Events } from "../events.ts";
import type { ProjectStore } from "../projects/store.ts";
import type { SessionService } from "../sessions/service.ts";
import type { TurnOutcome } from "./session-turn.ts";
import type { SlackClient } from "./slack-client.ts";
import type { ChannelStore } from "./store.ts";

export type ChannelBridgeDeps = {
  store: ChannelStore;
  slack: SlackClient;
  projects: ProjectStore;
  accounts: AccountStore;
  sessions: SessionService | undefined;
  /** One message to a session's agent, waited for until its run ends. */
  runTurn: (project: Project, sessionId: string, text: string) => Promise<TurnOutcome>;
  /** `change-request.changed`: a CR a session opened, and its fate, are posted to the session's threads. */
  events: Events;
  publicUrl: () => string;
  log: (msg: string, extra?: Record<string, unknown>) => void;
};

type EventCallback = Extract<SlackEnvelope, { type: "event_callback" }>;
type Thread = { channel: Channel; threadTs: string };

const UNAVAILABLE = "error: sessions are unavailable: this server runs without a sandbox driver";
const USAGE = "Mention me with what to do, for example: @svc add a health check endpoint";
const LEADING_MENTIONS = /^(\s*<@[A-Z0-9]+(\|[^>]*)?>)+\s*/;

/** Slack escapes these three in message text (https://api.slack.com/reference/surfaces/formatting#escaping). */
const unescapeSlack = (text: string) => text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/** The prompt of a mention: the text without the leading `<@U…>` mention(s). */
export const promptOf = (text: string) => unescapeSlack(text.replace(LEADING_MENTIONS, "")).trim();

/** The app's own user ids in this workspace, from the envelope. */
function appUserIds(envelope: EventCallback): string[] {
  return [
    ...(envelope.authorizations ?? []).flatMap((a) => (a.user_id ? [a.user_id] : [])),
    ...(envelope.authed_users ?? []),
  ];
}

/**
 * Connected channels and sessions: a mention starts a session (or reaches the thread's), a reply in its thread
 * goes to the same session, and what the agent answers, and the CRs it opens and their fate, come back to the
 * thread.
 */
export function createChannelBridge(deps: ChannelBridgeDeps) {
  const { store, slack } = deps;
  // One run at a time per session: a second message waits for the first's answer, as in a chat.
  const oneTurnAtATime = createKeyedMutex();
  const dashboard = (path: string) => `${deps.publicUrl()}/dashboard/projects/${path}`;
  const post = (thread: Thread, text: string) =>
    slack.postMessage({ channel: thread.channel.channel_id, thread_ts: thread.threadTs, text });

  async function deliver(project: Project, thread: Thread, sessionId: string, text: string): Promise<void> {
    const sessions = deps.sessions;
    if (!sessions) return post(thread, UNAVAILABLE);
    await oneTurnAtATime(sessionId, async () => {
      try {
        const session = await sessions.get(project, sessionId);
        if (session.status === "stopped" || session.status === "failed") {
          await post(thread, `Session ${sessionId} was ${session.status}; restarting it…`);
          await sessions.restart(project, sessionId);
        }
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        return post(thread, `error: ${err.message}`);
      }
      const outcome = await deps.runTurn(project, sessionId, text);
      await post(thread, "answer" in outcome ? outcome.answer : `error: ${outcome.error}`);
    });
  }

  async function startSession(project: Project, thread: Thread, prompt: string): Promise<void> {
    if (!deps.sessions) return post(thread, UNAVAILABLE);
    // The prompt goes by message once the agent listens, not in the sandbox's env: a run nobody follows is lost.
    let session: Awaited<ReturnType<SessionService["create"]>>;
    try {
      session = await deps.sessions.create(project, {}, thread.channel.connected_by);
    } catch (err) {
      // The account's session cap, say: the person in the thread should know why nothing happens.
      if (!(err instanceof ApiError)) throw err;
      return post(thread, `error: ${err.message}`);
    }
    await store.recordThread(thread.channel.id, thread.threadTs, session.session_id);
    await post(
      thread,
      `Started session ${session.session_id}: ${dashboard(`${project.id}/sessions/${session.session_id}`)}`,
    );
    await deliver(project, thread, session.session_id, prompt);
  }

  async function onMessage(envelope: EventCallback, event: SlackMessageEvent): Promise<void> {
    // Bots' posts (ours included), edits, joins: never a prompt, so the bot's replies never loop.
    if (event.bot_id || event.subtype || !event.channel || !event.ts) return;
    const channel = await store.byProviderChannel("slack", envelope.team_id, event.channel);
    if (!channel) return;
    const project = await deps.projects.byId(channel.project_id);
    if (!project) return;
    const thread = { channel, threadTs: event.thread_ts ?? event.ts };
    const text = event.text ?? "";
    if (event.type === "app_mention") {
      const prompt = promptOf(text);
      if (!prompt) return post(thread, USAGE);
      const existing = await store.threadSession(channel.id, thread.threadTs);
      return existing ? deliver(project, thread, existing, prompt) : startSession(project, thread, prompt);
    }
    if (event.type !== "message" || !event.thread_ts) return;
    // A reply that mentions the app arrives as an app_mention too: that one is delivered.
    if (appUserIds(envelope).some((id) => text.includes(`<@${id}>`) || text.includes(`<@${id}|`))) return;
    const sessionId = await store.threadSession(channel.id, event.thread_ts);
    if (sessionId) await deliver(project, thread, sessionId, unescapeSlack(text).trim());
  }

  /** Posts `text` in every thread the CR's session talks in. */
  async function toSessionThreads(cr: ChangeRequestRecord, text: string): Promise<void> {
    if (!cr.origin_session_id) return;
    for (const t of await store.threadsOf(cr.origin_session_id)) {
      await slack.postMessage({ channel: t.channel_id, thread_ts: t.thread_ts, text });
    }
  }

  async function personName(userId: string | null): Promise<string> {
    const user = userId ? await deps.accounts.user(userId) : undefined;
    return user ? user.name || user.email : "someone";
  }

  /** Work that runs after the request that caused it answered: its failure is logged, never thrown. */
  const background = (what: string, work: () => Promise<void>) =>
    void work().catch((err) =>
      deps.log(`channels: ${what} failed`, { error: err instanceof ApiError ? err.message : String(err) }),
    );

  /** What the session's threads read about one of its CRs. */
  async function crLine(project: Project, cr: ChangeRequestRecord, change: "created" | "merged" | "closed") {
    if (change === "created")
      return `Opened CR #${cr.number}: ${cr.title} — ${dashboard(`${project.id}/crs/${cr.number}`)}`;
    return `CR #${cr.number} ${change} by ${await personName(change === "merged" ? cr.merged_by : cr.closed_by)}`;
  }

  deps.events.on("change-request.changed", ({ project, cr, change }) => {
    if (change !== "queued" && change !== "approved")
      background("CR post", async () => toSessionThreads(cr, await crLine(project, cr, change)));
  });

  return {
    /** An accepted, first-seen Events API callback. */
    handleSlackEvent: (envelope: EventCallback) => background("event", () => onMessage(envelope, envelope.event)),
  };
}

export type ChannelBridge = ReturnType<typeof createChannelBridge>;
