import type { FastifyInstance } from "fastify";
import type { StoppedSessions } from "../../protocol/admin.ts";
import type { Sql } from "../db/sql.ts";
import type { ProjectStore } from "../projects/store.ts";
import type { SessionService } from "../sessions/service.ts";
import { backupRoutes } from "./backup.ts";

export type AdminRouteDeps = {
  sql: Sql;
  projects: ProjectStore;
  sessions: SessionService | undefined;
  /** The managed repositories' directory (a backup bundles them). */
  reposDir: string;
};

/** The installation administrator's routes: ROUTE_ROLES says so, and the auth hook checks it before each. */
export function adminRoutes(deps: AdminRouteDeps) {
  return async (app: FastifyInstance) => {
    await app.register(backupRoutes({ sql: deps.sql, reposDir: deps.reposDir }));
    /**
     * Stops every live session of this installation, whichever account it belongs to (`svc self-host stop
     * --sandboxes`), the way `sessions stop` does: sandbox removed, branch and record kept. It acts on this database's
     * sessions, so on this installation's sandboxes only: another stack on the same engine keeps its own.
     */
    app.post("/v1/admin/sessions/stop", { config: { auth: "account" } }, async (): Promise<StoppedSessions> => {
      const sessions = deps.sessions;
      if (!sessions) return { stopped: [] };
      const live = await deps.sql.query<{ session_id: string; project_id: string }>(
        "select session_id, project_id from project_sessions where status in ('provisioning', 'running') order by created_at",
      );
      const stopped: string[] = [];
      for (const { session_id, project_id } of live) {
        const project = await deps.projects.byId(project_id);
        if (!project) continue;
        await sessions.stop(project, session_id);
        stopped.push(session_id);
      }
      return { stopped };
    });

    /**
     * This installation's id (the label its sandboxes, apps and networks carry) and the images its sessions and apps
     * ran: what `svc self-host stop` and `svc uninstall` look for on the engine, so another stack's are never touched.
     */
    app.get("/v1/admin/installation", { config: { auth: "account" } }, async () => {
      const [installation] = await deps.sql.query<{ id: string }>("select id from installation");
      const images = await deps.sql.query<{ image: string }>(
        `select image from session_sandboxes where image is not null
         union select image from app_deploys where image is not null`,
      );
      return { id: installation!.id, images: images.map((r) => r.image).sort() };
    });
  };
}
