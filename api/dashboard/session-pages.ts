import { readFileSync } from "node:fs";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Forwarder } from "../../protocol/http-forward.ts";
import type { Project } from "../../protocol/project.ts";
import { Session } from "../../protocol/session.ts";
import { SafeText } from "../../protocol/text.ts";
import { TranscriptQuery } from "../../protocol/transcript.ts";
import type { ChangeRequestService } from "../change-requests/service.ts";
import { ApiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { createPreviewLink, previewOrigins } from "../previews/links.ts";
import { abortRun, type MessageDeps, relayEvents, sendMessage } from "../sessions/agent.ts";
import { Params } from "../sessions/routes.ts";
import { type SessionAccessDeps, sessionsOf } from "../sessions/session-access.ts";
import { SESSION_CHAT_SCRIPT_PATH, type SessionView, sessionPage, transcriptItem } from "./pages/session.ts";
import { browserProject } from "./project-access.ts";
import { contentSecurityPolicy } from "./security-headers.ts";
import { requireCsrf } from "./session-auth.ts";

/** Read once: the bundle has it beside itself (dist/assets), the sources beside this module. */
const CHAT_SCRIPT = readFileSync(new URL("./assets/session-chat.js", import.meta.url), "utf8");

const HTML = "text/html; charset=utf-8";
const CsrfForm = z.object({ _csrf: z.string() }).strict();
const MessageForm = z.object({ _csrf: z.string(), text: SafeText.min(1).max(100_000) }).strict();
const PreviewForm = z.object({ _csrf: z.string(), port: z.coerce.number().int().min(1).max(65_535) }).strict();

/** A form posted by the page's script (JSON, answered with JSON) or by a browser without it (answered with the page). */
const fromScript = (req: FastifyRequest) => req.headers["content-type"]?.startsWith("application/json") ?? false;

/**
 * The session page (`/dashboard/projects/{id}/sessions/{sid}`): status, branch, errors, stop and restart, a
 * preview link, the stored transcript (kept current by the page's script through `…/transcript`) and the chat
 * with its agent over the same calls as `svc sessions chat`. Registered inside the signed-in part of the dashboard.
 */
export function sessionPages(
  deps: SessionAccessDeps & MessageDeps & { changeRequests: ChangeRequestService },
  forward: Forwarder,
) {
  /** The page's data: the session now, the CRs its agent opened and its transcript. */
  async function viewOf(project: Project, sessionId: string, refusal?: string): Promise<SessionView> {
    const session = Session.parse(await sessionsOf(deps).get(project, sessionId));
    const [crs, transcript] = await Promise.all([
      deps.changeRequests.list(project, { status: "all" }),
      deps.transcripts.read(session.session_id),
    ]);
    const changeRequests = crs.filter((cr) => cr.origin_session_id === session.session_id);
    return { project, session, changeRequests, transcript, refusal };
  }

  return async (app: FastifyInstance) => {
    const base = "/projects/:projectId/sessions/:sessionId";
    const pagePath = (project: Project, sessionId: string) => `/dashboard/projects/${project.id}/sessions/${sessionId}`;
    const target = async (req: FastifyRequest) => {
      const project = await browserProject(deps, req);
      const { sessionId } = parseInput(Params, req.params, "params");
      return { project, sessionId };
    };

    app.get(SESSION_CHAT_SCRIPT_PATH.slice("/dashboard".length), async (_req, reply) =>
      reply.type("text/javascript; charset=utf-8").send(CHAT_SCRIPT),
    );

    app.get(base, async (req, reply) => {
      const { project, sessionId } = await target(req);
      const view = await viewOf(project, sessionId);
      // "Open preview" posts here and is redirected to the preview's own origin, which the form's policy must allow.
      reply.header("content-security-policy", contentSecurityPolicy(previewOrigins(deps)));
      return reply.type(HTML).send(sessionPage(view, req.browserSession!.csrf));
    });

    // The page's live transcript: the entries added or changed since `after_rev`, as the page renders them.
    app.get(`${base}/transcript`, async (req) => {
      const { project, sessionId } = await target(req);
      const { after_rev } = parseInput(TranscriptQuery, req.query ?? {}, "query");
      const session = await sessionsOf(deps).get(project, sessionId);
      const entries = await deps.transcripts.read(session.session_id, after_rev);
      return { entries: entries.map((e) => ({ seq: e.seq, rev: e.rev, html: transcriptItem(e).__html })) };
    });

    app.get(`${base}/events`, async (req, reply) => {
      const { project, sessionId } = await target(req);
      await relayEvents(deps, forward, project, sessionId, req, reply);
    });

    app.post(`${base}/messages`, { preHandler: requireCsrf }, async (req, reply) => {
      const { project, sessionId } = await target(req);
      const { text } = parseInput(MessageForm, req.body, "body");
      const conversation = await sendMessage(deps, project, sessionId, { text });
      if (fromScript(req)) return reply.code(202).send({ conversation });
      return reply.redirect(pagePath(project, sessionId), 303);
    });

    app.post(`${base}/abort`, { preHandler: requireCsrf }, async (req, reply) => {
      const { project, sessionId } = await target(req);
      parseInput(CsrfForm, req.body, "body");
      const result = await abortRun(deps, project, sessionId);
      if (fromScript(req)) return reply.send(result);
      return reply.redirect(pagePath(project, sessionId), 303);
    });

    for (const action of ["stop", "restart"] as const) {
      app.post(`${base}/${action}`, { preHandler: requireCsrf }, async (req, reply) => {
        const { project, sessionId } = await target(req);
        parseInput(CsrfForm, req.body, "body");
        try {
          await sessionsOf(deps)[action](project, sessionId);
        } catch (err) {
          // Refusals a person can act on (a conflict, the session cap) come back on the page, not as JSON.
          if (!(err instanceof ApiError) || (err.status !== 409 && err.status !== 429)) throw err;
          const view = await viewOf(project, sessionId, err.message);
          return reply.code(err.status).type(HTML).send(sessionPage(view, req.browserSession!.csrf));
        }
        return reply.redirect(pagePath(project, sessionId), 303);
      });
    }

    app.post(`${base}/preview`, { preHandler: requireCsrf }, async (req, reply) => {
      const { project, sessionId } = await target(req);
      const { port } = parseInput(PreviewForm, req.body, "body");
      const link = await createPreviewLink(deps, project, sessionId, req.browserSession!.userId, port);
      return reply.redirect(link.url, 303);
    });
  };
}
