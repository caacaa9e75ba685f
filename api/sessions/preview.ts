import { Agent } from "node:http";
import type { FastifyInstance } from "fastify";
import httpProxy from "http-proxy";
import { z } from "zod";
import type { SessionService } from "../../orchestrator/sessions/service.ts";
import { signUserContext, USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { actingUserId } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";

const Params = z.object({
  projectId: z.string(),
  sessionId: z.string().min(1).max(100),
  port: z.coerce.number().int().min(1).max(65535),
  "*": z.string().default(""),
});
/** A signed context lives a minute: long enough for one request, useless if it leaks. */
const CONTEXT_TTL_S = 60;

/**
 * `svc sessions preview`: the API forwards to the sandbox daemon's /proxy/{port}/ with a freshly signed
 * X-Svc-User-Context for the authenticated user; the caller's token never reaches the sandbox.
 */
export function previewRoutes(deps: { sessions: SessionService | undefined }) {
  return async (app: FastifyInstance) => {
    const proxy = httpProxy.createProxyServer({ agent: new Agent({ keepAlive: true }), proxyTimeout: 0 });
    // Request bodies stream through untouched.
    app.addContentTypeParser("*", (_req, payload, done) => done(null, payload));

    app.all("/v1/projects/:projectId/sessions/:sessionId/preview/:port/*", async (req, reply) => {
      if (!deps.sessions) throw apiError("NOT_CONFIGURED", "sessions are unavailable on this server");
      const params = parseInput(Params, req.params, "params");
      const target = await deps.sessions.previewTarget(req.project!, params.sessionId);
      const query = req.url.includes("?") ? req.url.slice(req.url.indexOf("?")) : "";
      const headers = {
        [USER_CONTEXT_HEADER]: signUserContext(target.serviceKey, {
          user_id: actingUserId(req.principal!),
          project_id: req.project!.id,
          session_id: params.sessionId,
          exp: Math.floor(Date.now() / 1000) + CONTEXT_TTL_S,
        }),
      };
      delete req.raw.headers.authorization;
      reply.hijack();
      req.raw.url = `/proxy/${params.port}/${params["*"]}${query}`;
      proxy.web(req.raw, reply.raw, { target: target.url, headers }, (err) => {
        if (!reply.raw.headersSent) reply.raw.writeHead(502, { "content-type": "application/json" });
        reply.raw.end(JSON.stringify({ error: `sandbox unreachable: ${err.message}`, code: "REPO_UNAVAILABLE" }));
      });
    });
  };
}
