import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { AbortResult, PromptAccepted } from "../../protocol/daemon.ts";
import { MODEL_SETUP_COMMAND, PROJECT_MODEL_COMMAND } from "../../protocol/env.ts";
import { ErrorBody } from "../../protocol/errors.ts";
import type { Forwarder } from "../../protocol/http-forward.ts";
import type { Project } from "../../protocol/project.ts";
import { SessionMessageBody } from "../../protocol/session.ts";
import { apiError } from "../errors.ts";
import { writeError } from "../http/error-handler.ts";
import { parseInput } from "../http/validate.ts";
import { Params } from "./routes.ts";
import { type SessionAccessDeps, sessionsOf } from "./session-access.ts";
import type { TranscriptStore } from "./transcript-store.ts";

const CONTROL_TIMEOUT_MS = 15_000;

/** What a person does about a sandbox with no model gateway (its env is fixed when it is provisioned). */
export const modelNotConfigured = (sessionId: string) =>
  apiError(
    "MODEL_NOT_CONFIGURED",
    `no model is configured for this session's agent; run '${MODEL_SETUP_COMMAND}', restart the stack ` +
      `('svc self-host restart'), then 'svc sessions restart ${sessionId}'; or give this ` +
      `project its own: '${PROJECT_MODEL_COMMAND}', then restart the session`,
  );

/** A daemon's error answer, if it is one. */
function daemonError(text: string): ErrorBody | undefined {
  try {
    const body = ErrorBody.safeParse(JSON.parse(text));
    return body.success ? body.data : undefined;
  } catch {
    return undefined;
  }
}

/** One control call to a session's daemon with its service key; the daemon's own errors map onto the catalogue. */
async function control<S extends z.ZodType>(
  deps: Pick<SessionAccessDeps, "sessions">,
  project: Project,
  sessionId: string,
  path: string,
  body: unknown,
  schema: S,
): Promise<z.infer<S>> {
  const target = await sessionsOf(deps).sandboxTarget(project, sessionId);
  let res: Response;
  try {
    res = await fetch(`${target.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${target.serviceKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(CONTROL_TIMEOUT_MS),
    });
  } catch (err) {
    throw apiError("SANDBOX_UNREACHABLE", `the session's sandbox did not answer: ${(err as Error).message}`);
  }
  if (!res.ok) {
    const text = await res.text();
    const refusal = daemonError(text);
    if (refusal?.code === "MODEL_NOT_CONFIGURED") throw modelNotConfigured(sessionId);
    if (refusal?.code === "AGENT_NOT_FOUND") throw apiError("AGENT_NOT_FOUND", refusal.error, { field: "agent" });
    if (res.status === 503) throw apiError("SESSION_NOT_RUNNING", "the session's agent is starting; try again shortly");
    throw apiError("SANDBOX_UNREACHABLE", `the session's sandbox answered ${res.status}: ${text.slice(0, 200)}`);
  }
  return schema.parse(await res.json());
}

export type MessageDeps = Pick<SessionAccessDeps, "sessions"> & { transcripts: TranscriptStore };

/**
 * Sends a message to the session's agent; the conversation it went to. It is in the transcript before the agent
 * has it, so the agent's answer can never be stored ahead of it; one the sandbox refused goes again.
 */
export async function sendMessage(
  deps: MessageDeps,
  project: Project,
  sessionId: string,
  body: SessionMessageBody,
): Promise<string> {
  const entry = await deps.transcripts.appendUser(sessionId, body.text);
  try {
    const { session: conversation } = await control(deps, project, sessionId, "/svc/prompt", body, PromptAccepted);
    await deps.transcripts.setConversation(entry, conversation);
    return conversation;
  } catch (err) {
    await deps.transcripts.remove(entry);
    throw err;
  }
}

export function abortRun(deps: SessionAccessDeps, project: Project, sessionId: string) {
  return control(deps, project, sessionId, "/svc/abort", {}, AbortResult);
}

/** Relays the daemon's AgentEvents (server-sent events) to `req`'s client until either side ends. */
export async function relayEvents(
  deps: SessionAccessDeps,
  forward: Forwarder,
  project: Project,
  sessionId: string,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const target = await sessionsOf(deps).sandboxTarget(project, sessionId);
  reply.hijack();
  await forward(req.raw, reply.raw, target.url, "/svc/events", {
    headers: { authorization: `Bearer ${target.serviceKey}` },
    // The dashboard's session cookie is the browser's key to this server; the sandbox never sees it.
    drop: ["cookie"],
    unreachable: (res, err) =>
      writeError(res, apiError("SANDBOX_UNREACHABLE", `the session's sandbox did not answer: ${err.message}`)),
  });
}

/**
 * Talking to a session's agent (`svc sessions chat`): send a message, abort the run, and follow what the agent
 * does as server-sent AgentEvents (protocol/daemon.ts), relayed from the daemon's /svc/events.
 */
export function agentRoutes(deps: SessionAccessDeps & MessageDeps, forward: Forwarder) {
  return async (app: FastifyInstance) => {
    const base = "/v1/projects/:projectId/sessions/:sessionId";

    app.post(`${base}/messages`, async (req, reply) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      const body = parseInput(SessionMessageBody, req.body ?? {}, "body");
      const conversation = await sendMessage(deps, req.project!, sessionId, body);
      return reply.code(202).send({ conversation });
    });

    app.post(`${base}/abort`, async (req) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      return abortRun(deps, req.project!, sessionId);
    });

    app.get(`${base}/events`, async (req, reply) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      await relayEvents(deps, forward, req.project!, sessionId, req, reply);
    });
  };
}
