import type { ChangeRequest, ChangeRequestStatus } from "../../protocol/change-request.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

type Row = Omit<ChangeRequest, "merged_at" | "closed_at" | "created_at" | "updated_at"> & {
  merged_at: Date | null;
  closed_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

const COLUMNS = `cr_id, account_id, project_id, number, title, description, base_ref, head_ref, status,
  head_commit_sha, base_commit_sha, origin_session_id, created_by, merged_at, merged_by, merge_commit_sha,
  closed_at, closed_by, metadata, created_at, updated_at`;

function toCr(row: Row): ChangeRequest {
  return {
    ...row,
    merged_at: iso(row.merged_at),
    closed_at: iso(row.closed_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export type NewChangeRequest = {
  accountId: string;
  projectId: string;
  title: string;
  description: string;
  baseRef: string;
  headRef: string;
  headSha: string | null;
  baseSha: string | null;
  sessionId: string | null;
  createdBy: string;
  metadata: Record<string, unknown>;
};

/** Cached CRs, each with the row version (xmin) it was read at. */
const CACHED_CRS = 10_000;
// Transaction ids wrap around after billions: an entry never lives long enough to meet its xmin again.
const CACHED_CR_MS = 60_000;

export type MergeRecord = { mergedBy: string; mergeCommitSha: string; baseSha: string; headSha: string };

export function createChangeRequestStore(sql: Sql) {
  const one = async (text: string, params: unknown[]) => {
    const [row] = await sql.query<Row>(text, params);
    return row && toCr(row);
  };

  /**
   * A CR read costs the engine little to find but much to output (twenty-odd columns, timestamps, JSON): a repeat
   * read asks only for the row's version (xmin, new with every update of the row, whoever made it: this store, a
   * foreign key's `set null`, another replica) and serves the row cached at that version, so it is never stale.
   */
  const cached = new Map<string, { version: string; cr: ChangeRequest; at: number }>();
  async function versioned(key: string, where: string, params: unknown[]): Promise<ChangeRequest | undefined> {
    const hit = cached.get(key);
    if (hit && Date.now() - hit.at < CACHED_CR_MS) {
      const [current] = await sql.query<{ version: string }>(
        `select xmin::text as version from change_requests where ${where}`,
        params,
      );
      if (current?.version === hit.version) return { ...hit.cr };
    }
    const [row] = await sql.query<Row & { version: string }>(
      `select ${COLUMNS}, xmin::text as version from change_requests where ${where}`,
      params,
    );
    cached.delete(key);
    if (!row) return undefined;
    const { version, ...fields } = row;
    const cr = toCr(fields);
    cached.set(key, { version, cr, at: Date.now() });
    if (cached.size > CACHED_CRS) cached.delete(cached.keys().next().value!);
    return { ...cr };
  }

  return {
    /** Inserts with the next number of the project, taken under the project row's lock: unique, never reused. */
    async create(cr: NewChangeRequest): Promise<ChangeRequest> {
      return sql.transaction(async (tx) => {
        const [seq] = await tx.query<{ n: number }>(
          "update projects set cr_number_seq = cr_number_seq + 1 where id = $1 returning cr_number_seq as n",
          [cr.projectId],
        );
        // A session id that names no session of this project is dropped (SPEC Behavior 1).
        const [session] = cr.sessionId
          ? await tx.query<{ session_id: string }>(
              "select session_id from project_sessions where session_id = $1 and project_id = $2",
              [cr.sessionId, cr.projectId],
            )
          : [];
        const [row] = await tx.query<Row>(
          `insert into change_requests (account_id, project_id, number, title, description, base_ref, head_ref,
             head_commit_sha, base_commit_sha, origin_session_id, created_by, metadata)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text::jsonb) returning ${COLUMNS}`,
          [
            cr.accountId,
            cr.projectId,
            seq!.n,
            cr.title,
            cr.description,
            cr.baseRef,
            cr.headRef,
            cr.headSha,
            cr.baseSha,
            session?.session_id ?? null,
            cr.createdBy,
            JSON.stringify(cr.metadata),
          ],
        );
        return toCr(row!);
      });
    },

    byId: (projectId: string, crId: string) =>
      versioned(`${projectId}/${crId}`, "project_id = $1 and cr_id = $2", [projectId, crId]),

    byNumber: (projectId: string, number: number) =>
      versioned(`${projectId}#${number}`, "project_id = $1 and number = $2", [projectId, number]),

    async list(projectId: string, status: ChangeRequestStatus | "all"): Promise<ChangeRequest[]> {
      const rows =
        status === "all"
          ? await sql.query<Row>(`select ${COLUMNS} from change_requests where project_id = $1 order by number desc`, [
              projectId,
            ])
          : await sql.query<Row>(
              `select ${COLUMNS} from change_requests where project_id = $1 and status = $2 order by number desc`,
              [projectId, status],
            );
      return rows.map(toCr);
    },

    /** The refresh rule's write: only while still open, only when a SHA changed. */
    refreshShas: (crId: string, headSha: string, baseSha: string) =>
      one(
        `update change_requests set head_commit_sha = $2, base_commit_sha = $3, updated_at = now()
         where cr_id = $1 and status = 'open' returning ${COLUMNS}`,
        [crId, headSha, baseSha],
      ),

    edit: (crId: string, title: string | undefined, description: string | undefined) =>
      one(
        `update change_requests set title = coalesce($2, title), description = coalesce($3, description), updated_at = now()
         where cr_id = $1 returning ${COLUMNS}`,
        [crId, title ?? null, description ?? null],
      ),

    close: (crId: string, userId: string) =>
      one(
        `update change_requests set status = 'closed', closed_at = now(), closed_by = $2, updated_at = now()
         where cr_id = $1 and status = 'open' returning ${COLUMNS}`,
        [crId, userId],
      ),

    reopen: (crId: string) =>
      one(
        `update change_requests set status = 'open', closed_at = null, closed_by = null, updated_at = now()
         where cr_id = $1 and status = 'closed' returning ${COLUMNS}`,
        [crId],
      ),

    markMerged: (crId: string, m: MergeRecord) =>
      one(
        `update change_requests set status = 'merged', merged_at = now(), merged_by = $2, merge_commit_sha = $3,
           base_commit_sha = $4, head_commit_sha = $5, updated_at = now()
         where cr_id = $1 and status = 'open' returning ${COLUMNS}`,
        [crId, m.mergedBy, m.mergeCommitSha, m.baseSha, m.headSha],
      ),
  };
}

export type ChangeRequestStore = ReturnType<typeof createChangeRequestStore>;
