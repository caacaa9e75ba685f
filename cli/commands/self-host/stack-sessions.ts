import { ProjectList } from "../../../protocol/project.ts";
import { type Session, SessionList } from "../../../protocol/session.ts";
import type { createApiClient } from "../../api-client.ts";

/** Every session of every project the admin sees, with its project (status counts them). */
export async function allSessions(
  api: ReturnType<typeof createApiClient>,
): Promise<{ projectId: string; session: Session }[]> {
  const { projects } = await api.request("GET", "/v1/projects", ProjectList);
  const lists = await Promise.all(
    projects.map(async (p) => ({
      projectId: p.id,
      sessions: (await api.request("GET", `/v1/projects/${p.id}/sessions`, SessionList)).sessions,
    })),
  );
  return lists.flatMap((l) => l.sessions.map((session) => ({ projectId: l.projectId, session })));
}
