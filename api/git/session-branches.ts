import type { Project } from "../../protocol/project.ts";
import type { Sql } from "../db/sql.ts";
import type { Repositories } from "./repositories.ts";

type Log = (msg: string, extra?: Record<string, unknown>) => void;

type Row = { session_id: string; project_id: string; branch: string; base_ref: string; provisioner: string | null };

/**
 * A session's row is written first (`provisioning`), its branch is cut from the base's tip afterwards by the
 * provisioner: a process killed between the two leaves a session without its branch (never a branch without its
 * session). The reconciler then marks the session failed, and a restart could not boot it, since a restart clones the
 * branch and does not cut it. Run at API start, this cuts each such missing branch where the create would have: at
 * its base's tip, create-only (an existing branch is never moved). Sessions a live process is provisioning are left
 * to it. Returns how many branches were cut.
 */
export async function cutMissingSessionBranches(deps: {
  sql: Sql;
  repos: Repositories;
  project: (projectId: string) => Promise<Project | undefined>;
  isAlive: (instanceId: string | null) => Promise<boolean>;
  log: Log;
}): Promise<number> {
  const rows = await deps.sql.query<Row>(
    `select session_id, project_id, branch, base_ref, provisioner from project_sessions
      where status in ('provisioning', 'failed') order by project_id`,
  );
  const byProject = new Map<string, Row[]>();
  for (const row of rows) {
    if (row.provisioner && (await deps.isAlive(row.provisioner))) continue;
    byProject.set(row.project_id, [...(byProject.get(row.project_id) ?? []), row]);
  }
  let cut = 0;
  for (const [projectId, sessions] of byProject) {
    const project = await deps.project(projectId);
    // An unreachable repository keeps its sessions as they are until the next start.
    const tips = project && (await deps.repos.tips(project, 0));
    if (!project || !tips) continue;
    for (const session of sessions) {
      const base = tips.get(session.base_ref);
      if (tips.has(session.branch) || !base) continue;
      if (await deps.repos.createBranch(project, session.branch, base)) {
        cut += 1;
        deps.log("cut the branch of a session whose provisioning was interrupted", {
          session: session.session_id,
          branch: session.branch,
          base: session.base_ref,
        });
      }
    }
  }
  return cut;
}
