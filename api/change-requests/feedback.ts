import type { ChangeRequest } from "../../protocol/change-request.ts";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { Project } from "../../protocol/project.ts";
import { STARTING_STATUSES } from "../../protocol/session.ts";
import { ApiError } from "../errors.ts";
import { type MessageDeps, sendMessage } from "../sessions/agent.ts";
import type { SessionService } from "../sessions/service.ts";
import type { SessionStore } from "../sessions/store.ts";

/** How long a session restarted or started for a prompt has to start and take it. */
const DELIVERY_MS = 5 * 60_000;
const RETRY_MS = 500;

/** What a prompt for a CR's agent needs of the CR (a stored record serves as well as the API's view). */
export type CrOfAgent = Pick<ChangeRequest, "cr_id" | "project_id" | "head_ref" | "base_ref" | "origin_session_id">;

export type FeedbackDeps = MessageDeps & {
  sessions: SessionService;
  sessionStore: Pick<SessionStore, "get">;
  /** The newest session on the CR's head branch that an earlier prompt of this CR went to (comments-store.ts). */
  earlierSession: (cr: CrOfAgent) => Promise<string | undefined>;
  log: (msg: string, extra?: Record<string, unknown>) => void;
  deliveryMs?: number;
};

/** How a handed-off prompt ended: the agent has it, or why it never got there. */
export type DeliveryOutcome = { delivered: true } | { delivered: false; error: string };

export type Handoff = {
  /** The session that takes the prompt. */
  sessionId: string;
  /** Delivers in the background (a new session already has it as its first prompt); `record` hears how it ended. */
  deliver(record: (outcome: DeliveryOutcome) => Promise<void>): void;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Prompts for a CR's agent (review comments, conflict resolution). The agent is the session whose branch is the
 * CR's head, so its pushes update the same CR: the origin session, else the one an earlier prompt of this CR
 * started, else a new session on the head branch with the prompt as its first. A stopped or failed one is
 * restarted (its conversation and checkpoint restored) and hears the prompt once it runs.
 */
export function createFeedback(deps: FeedbackDeps) {
  const { sessions } = deps;
  // Prompts reach one session in the order they were handed off.
  const oneAtATime = createKeyedMutex();

  async function agentSession(cr: CrOfAgent) {
    for (const id of [cr.origin_session_id, await deps.earlierSession(cr)]) {
      const session = id ? await deps.sessionStore.get(cr.project_id, id) : undefined;
      if (session?.branch === cr.head_ref) return session;
    }
    return undefined;
  }

  /** Waits for the session to run, then sends; a runtime still booting (SESSION_NOT_RUNNING) is asked again. */
  async function send(project: Project, sessionId: string, prompt: string): Promise<void> {
    const deadline = Date.now() + (deps.deliveryMs ?? DELIVERY_MS);
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`session ${sessionId} did not take the prompt in time`);
      const session = await sessions.waitStarted(project, sessionId, {
        timeoutMs: left,
        signal: AbortSignal.timeout(left),
      });
      if (STARTING_STATUSES.includes(session.status)) continue;
      if (session.status !== "running")
        throw new Error(`session ${sessionId} is ${session.status}${session.error ? `: ${session.error}` : ""}`);
      try {
        await sendMessage(deps, project, sessionId, { text: prompt });
        return;
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== "SESSION_NOT_RUNNING") throw err;
        await sleep(RETRY_MS);
      }
    }
  }

  /** A new session's first prompt runs when it boots: delivered once it runs. */
  async function started(project: Project, sessionId: string): Promise<void> {
    const timeoutMs = deps.deliveryMs ?? DELIVERY_MS;
    const session = await sessions.waitStarted(project, sessionId, {
      timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (session.status !== "running")
      throw new Error(`session ${sessionId} is ${session.status}${session.error ? `: ${session.error}` : ""}`);
  }

  return {
    /**
     * Picks (restarting it if need be) or starts the CR's agent for `prompt`, as `userId`: a start the session cap
     * refuses throws its 429 before anything is sent or stored. The caller records the handoff, then delivers.
     */
    async handOff(project: Project, cr: CrOfAgent, prompt: string, userId: string): Promise<Handoff> {
      const session = await agentSession(cr);
      const handoff = (sessionId: string, deliver: () => Promise<void>): Handoff => ({
        sessionId,
        deliver: (record) =>
          void oneAtATime(sessionId, deliver)
            .then(
              (): DeliveryOutcome => ({ delivered: true }),
              (err: Error): DeliveryOutcome => ({ delivered: false, error: err.message }),
            )
            .then(async (outcome) => {
              if (!outcome.delivered)
                deps.log("a prompt for a CR's agent was not delivered", {
                  cr: cr.cr_id,
                  session: sessionId,
                  ...outcome,
                });
              await record(outcome);
            })
            .catch((err: Error) => deps.log("a prompt's delivery could not be recorded", { error: err.message })),
      });
      if (!session) {
        const created = await sessions.create(project, { prompt, base_ref: cr.base_ref }, userId, {
          branch: cr.head_ref,
        });
        return handoff(created.session_id, () => started(project, created.session_id));
      }
      if (session.status !== "running" && !STARTING_STATUSES.includes(session.status))
        await sessions.restart(project, session.session_id);
      return handoff(session.session_id, () => send(project, session.session_id, prompt));
    },
  };
}

export type Feedback = ReturnType<typeof createFeedback>;
