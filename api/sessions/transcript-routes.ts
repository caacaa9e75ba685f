import type { FastifyInstance } from "fastify";
import { TranscriptQuery } from "../../protocol/transcript.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { Params } from "./routes.ts";
import type { SessionStore } from "./store.ts";
import type { TranscriptStore } from "./transcript-store.ts";

export type TranscriptRouteDeps = { sessionStore: SessionStore; transcripts: TranscriptStore };

/**
 * GET .../sessions/{sid}/transcript: the session's stored conversation (protocol/transcript.ts), whatever the
 * state of its sandbox, on any server of the installation (one without a sandbox driver too).
 */
export function transcriptRoutes(deps: TranscriptRouteDeps) {
  return async (app: FastifyInstance) => {
    app.get("/v1/projects/:projectId/sessions/:sessionId/transcript", async (req) => {
      const { sessionId } = parseInput(Params, req.params, "params");
      const { after_rev } = parseInput(TranscriptQuery, req.query ?? {}, "query");
      if (!(await deps.sessionStore.get(req.project!.id, sessionId)))
        throw apiError("SESSION_NOT_FOUND", `session ${sessionId} not found in this project`);
      return deps.transcripts.read(sessionId, after_rev);
    });
  };
}
