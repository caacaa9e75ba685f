import { randomUUID } from "node:crypto";
import type { AppDeployRecord, AppsPort } from "../../orchestrator/ports.ts";
import type { AppDeploy } from "../../protocol/app.ts";
import { AppSpec } from "../../protocol/manifest.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

const COLUMNS = `id, project_id, app, revision, key, tip_key, spec, image, status, trigger, rollback_of, container_id,
  endpoint, error, instance_id, started_at, finished_at`;

type Row = Omit<AppDeployRecord, "spec"> & { spec: unknown };

const toRecord = (row: Row): AppDeployRecord => ({
  ...row,
  spec: AppSpec.parse(typeof row.spec === "string" ? JSON.parse(row.spec) : row.spec),
  started_at: new Date(row.started_at),
  finished_at: row.finished_at && new Date(row.finished_at),
});

/** A deploy as the API answers it (protocol/app.ts). */
export const toAppDeploy = (d: AppDeployRecord): AppDeploy => ({
  id: d.id,
  app: d.app,
  revision: d.revision,
  key: d.key,
  status: d.status,
  trigger: d.trigger,
  rollback_of: d.rollback_of,
  started_at: iso(d.started_at),
  finished_at: iso(d.finished_at),
  error: d.error,
});

/** app_deploys (migration 0013): every deploy attempt of the manifests' apps. */
export function createAppDeployStore(sql: Sql) {
  const select = async (where: string, params: unknown[], tail = "order by started_at desc") =>
    (await sql.query<Row>(`select ${COLUMNS} from app_deploys where ${where} ${tail}`, params)).map(toRecord);

  return {
    async insert(d: Parameters<AppsPort["insert"]>[0]): Promise<AppDeployRecord> {
      const [row] = await sql.query<Row>(
        `insert into app_deploys (id, project_id, app, revision, key, tip_key, spec, status, trigger, rollback_of,
           instance_id)
         values ($1, $2, $3, $4, $5, $6, $7::text::jsonb, 'building', $8, $9, $10) returning ${COLUMNS}`,
        [
          randomUUID(),
          d.project_id,
          d.app,
          d.revision,
          d.key,
          d.tip_key,
          JSON.stringify(d.spec),
          d.trigger,
          d.rollback_of,
          d.instance_id,
        ],
      );
      return toRecord(row!);
    },

    async update(id: string, fields: Parameters<AppsPort["update"]>[1]): Promise<void> {
      const sets: string[] = [];
      const params: unknown[] = [id];
      for (const name of ["status", "image", "container_id", "endpoint", "error"] as const) {
        if (fields[name] === undefined) continue;
        params.push(fields[name]);
        sets.push(`${name} = $${params.length}`);
      }
      if (fields.finished) sets.push("finished_at = clock_timestamp()");
      if (sets.length > 0) await sql.query(`update app_deploys set ${sets.join(", ")} where id = $1`, params);
    },

    newest: async (projectId: string, app: string) =>
      (await select("project_id = $1 and app = $2", [projectId, app], "order by started_at desc limit 1"))[0],

    active: (projectId?: string) =>
      projectId
        ? select("status in ('building', 'starting', 'live') and project_id = $1", [projectId])
        : select("status in ('building', 'starting', 'live')", []),

    previousLive: async (projectId: string, app: string, before: Date, key: string) =>
      (
        await select(
          "project_id = $1 and app = $2 and status = 'superseded' and started_at < $3 and key <> $4",
          [projectId, app, before, key],
          "order by started_at desc limit 1",
        )
      )[0],

    /** The app's history, newest first. */
    history: (projectId: string, app: string, limit = 50) =>
      select("project_id = $1 and app = $2", [projectId, app], `order by started_at desc limit ${limit}`),

    /** The newest deploy of each app the project ever deployed (apps removed from the manifest included). */
    newestPerApp: (projectId: string) =>
      select(
        "id in (select distinct on (app) id from app_deploys where project_id = $1 order by app, started_at desc)",
        [projectId],
        "order by app",
      ),

    /** Where the app answers now: its live deploy's endpoint. */
    async liveEndpoint(projectId: string, app: string): Promise<string | undefined> {
      const [row] = await sql.query<{ endpoint: string | null }>(
        `select endpoint from app_deploys where project_id = $1 and app = $2 and status = 'live'
         order by started_at desc limit 1`,
        [projectId, app],
      );
      return row?.endpoint ?? undefined;
    },
  };
}

export type AppDeployStore = ReturnType<typeof createAppDeployStore>;
