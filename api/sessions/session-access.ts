import type { AuthDeps } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import type { SessionService } from "./service.ts";

/** What every route that reaches a session (lifecycle, previews, agent messages) needs. */
export type SessionAccessDeps = AuthDeps & {
  sessions: SessionService | undefined;
  publicUrl: () => string;
  /** `<port>-<session>.<domain>` serves a preview at the root of its own origin (default `localhost`). */
  previewDomain: () => string;
};

/** The session service, or 503 on a server that runs without a sandbox driver. */
export function sessionsOf(deps: { sessions: SessionService | undefined }): SessionService {
  if (!deps.sessions)
    throw apiError("NOT_CONFIGURED", "sessions are unavailable: this server runs without a sandbox driver");
  return deps.sessions;
}
