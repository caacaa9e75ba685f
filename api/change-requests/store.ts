import type { ChangeRequestRecord as ChangeRequest, ChangeRequestStatus } from "../../protocol/change-request.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import type { MergeIntent } from "./merge-intents.ts";

type Row = Omit<ChangeRequest, "merged_at" | "closed_at" | "created_at" | "updated_at"> & {
  merged_at: Date | null;
  closed_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

const COLUMNS = `cr_id, account_id, project_id, number, title, description, base_ref, head_ref, status,
  head_commit_sha, base_commit_sha, origin_session_id, created_by, merged_at, merged_by, merge_commit_sha,
  closed_at, closed_by, metadata, auto_merge_at is not null as auto_merge, auto_merge_note, created_at, updated_at`;

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

export type NewMergeIntent = Omit<MergeIntent, "created_at">;

const INTENT_COLUMNS = `cr_id, intent_id, project_id, base_ref, target_sha, base_sha, head_sha, merged_by, instance_id,
  created_at`;

/** `mergedAt`: when the merge ran, if not now (a repair records the intent's time). */
const MARK_MERGED = `update change_requests set status = 'merged', merged_at = coalesce($6::timestamptz, now()),
    merged_by = $2, merge_commit_sha = $3, base_commit_sha = $4, head_commit_sha = $5, updated_at = now()
  where cr_id = $1 and status = 'open' returning ${COLUMNS}`;
const markMergedParams = (crId: string, m: MergeRecord, mergedAt: Date | null = null) => [
  crId,
  m.mergedBy,
  m.mergeCommitSha,
  m.baseSha,
  m.headSha,
  mergedAt,
];
const recordOf = (intent: MergeIntent): MergeRecord => ({
  mergedBy: intent.merged_by,
  mergeCommitSha: intent.target_sha,
  baseSha: intent.base_sha,
  headSha: intent.head_sha,
});

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

    /** The refresh rule's write (open or closed CRs), called only when a SHA changed; never a merged CR's. */
    refreshShas: (crId: string, headSha: string, baseSha: string) =>
      one(
        `update change_requests set head_commit_sha = $2, base_commit_sha = $3, updated_at = now()
         where cr_id = $1 and status <> 'merged' returning ${COLUMNS}`,
        [crId, headSha, baseSha],
      ),

    edit: (crId: string, title: string | undefined, description: string | undefined) =>
      one(
        `update change_requests set title = coalesce($2, title), description = coalesce($3, description), updated_at = now()
         where cr_id = $1 returning ${COLUMNS}`,
        [crId, title ?? null, description ?? null],
      ),

    /**
     * Closes an open CR that no merge is moving into its base (`merging` otherwise). The CR row's lock orders this
     * against `beginMerge`: one of the two sees the other's outcome.
     */
    close: (crId: string, userId: string): Promise<ChangeRequest | "merging" | undefined> =>
      sql.transaction(async (tx) => {
        const [cr] = await tx.query<{ status: string }>(
          "select status from change_requests where cr_id = $1 for update",
          [crId],
        );
        if (cr?.status !== "open") return undefined;
        const [intent] = await tx.query("select 1 from cr_merge_intents where cr_id = $1", [crId]);
        if (intent) return "merging";
        const [row] = await tx.query<Row>(
          `update change_requests set status = 'closed', closed_at = now(), closed_by = $2, updated_at = now()
           where cr_id = $1 and status = 'open' returning ${COLUMNS}`,
          [crId, userId],
        );
        return row && toCr(row);
      }),

    reopen: (crId: string) =>
      one(
        `update change_requests set status = 'open', closed_at = null, closed_by = null, updated_at = now()
         where cr_id = $1 and status = 'closed' returning ${COLUMNS}`,
        [crId],
      ),

    /**
     * Puts an open CR in its base's merge queue as `userId` (the one it merges as), or takes it out with `note`
     * saying why (null: taken out by a person). Joining again goes to the back of the queue.
     */
    setAutoMerge: (crId: string, by: { userId: string } | { note: string | null }) =>
      "userId" in by
        ? one(
            `update change_requests set auto_merge_by = $2, auto_merge_at = coalesce(auto_merge_at, now()),
               auto_merge_note = null, updated_at = now()
             where cr_id = $1 and status = 'open' returning ${COLUMNS}`,
            [crId, by.userId],
          )
        : one(
            `update change_requests set auto_merge_by = null, auto_merge_at = null, auto_merge_note = $2,
               updated_at = now()
             where cr_id = $1 returning ${COLUMNS}`,
            [crId, by.note],
          ),

    /** Every open CR waiting to auto-merge, each with who asked, in queue order (per base: the first goes first). */
    async autoMergeQueue(): Promise<(ChangeRequest & { auto_merge_by: string })[]> {
      const rows = await sql.query<Row & { auto_merge_by: string }>(
        `select ${COLUMNS}, auto_merge_by from change_requests
         where status = 'open' and auto_merge_at is not null order by auto_merge_at, number`,
      );
      return rows.map((r) => ({ ...toCr(r), auto_merge_by: r.auto_merge_by }));
    },

    /** The projects with at least one open CR: where checks and the merge queue have work. */
    async projectsWithOpen(): Promise<string[]> {
      const rows = await sql.query<{ project_id: string }>(
        "select distinct project_id from change_requests where status = 'open'",
      );
      return rows.map((r) => r.project_id);
    },

    /** Takes one more round of sending failed checks to the CR's agent, if fewer than `max` were taken. */
    async takeFixRound(crId: string, max: number): Promise<boolean> {
      const rows = await sql.query(
        "update change_requests set fix_rounds = fix_rounds + 1 where cr_id = $1 and fix_rounds < $2 returning 1",
        [crId, max],
      );
      return rows.length > 0;
    },

    /** Records a merge that moved no branch (everything on head was on base already). */
    markMerged: (crId: string, m: MergeRecord) => one(MARK_MERGED, markMergedParams(crId, m)),

    /**
     * The intent of a merge about to move the base branch, written only while the CR is open (under its row's lock,
     * as `close` takes it) and no other intent is there: `existing` is the one that is, `not-open` a CR merged or
     * closed meanwhile.
     */
    beginMerge: (intent: NewMergeIntent): Promise<MergeIntent | { existing: MergeIntent } | "not-open"> =>
      sql.transaction(async (tx) => {
        const [cr] = await tx.query<{ status: string }>(
          "select status from change_requests where cr_id = $1 for update",
          [intent.cr_id],
        );
        if (cr?.status !== "open") return "not-open";
        const [written] = await tx.query<MergeIntent>(
          `insert into cr_merge_intents (cr_id, project_id, base_ref, target_sha, base_sha, head_sha, merged_by,
             instance_id, intent_id) values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           on conflict (cr_id) do nothing returning ${INTENT_COLUMNS}`,
          [
            intent.cr_id,
            intent.project_id,
            intent.base_ref,
            intent.target_sha,
            intent.base_sha,
            intent.head_sha,
            intent.merged_by,
            intent.instance_id,
            intent.intent_id,
          ],
        );
        if (written) return written;
        const [existing] = await tx.query<MergeIntent>(
          `select ${INTENT_COLUMNS} from cr_merge_intents where cr_id = $1`,
          [intent.cr_id],
        );
        return existing ? { existing } : "not-open";
      }),

    /**
     * The base branch moved to the intent's target: the CR is merged and the intent gone, in one transaction. Like
     * every transaction here that touches both, it takes the CR row first, then the intent: never a deadlock.
     */
    finishMerge: (intent: MergeIntent) =>
      sql.transaction(async (tx) => {
        const [row] = await tx.query<Row>(MARK_MERGED, markMergedParams(intent.cr_id, recordOf(intent)));
        await tx.query("delete from cr_merge_intents where cr_id = $1 and intent_id = $2", [
          intent.cr_id,
          intent.intent_id,
        ]);
        return row && toCr(row);
      }),

    /**
     * A repair's `record`: the CR becomes merged exactly as the intent says, at the intent's time, if this call is
     * the one that removes the intent (another settlement of the same intent changes nothing).
     */
    settleMerged: (intent: MergeIntent) =>
      sql.transaction(async (tx) => {
        await tx.query("select 1 from change_requests where cr_id = $1 for update", [intent.cr_id]);
        const gone = await tx.query("delete from cr_merge_intents where cr_id = $1 and intent_id = $2 returning 1", [
          intent.cr_id,
          intent.intent_id,
        ]);
        if (gone.length === 0) return undefined;
        const [row] = await tx.query<Row>(
          MARK_MERGED,
          markMergedParams(intent.cr_id, recordOf(intent), intent.created_at),
        );
        return row && toCr(row);
      }),

    /** Removes this intent (a move that failed, or a repair's `drop`); a newer intent of the CR stays. */
    async dropIntent(intent: MergeIntent): Promise<void> {
      await sql.query("delete from cr_merge_intents where cr_id = $1 and intent_id = $2", [
        intent.cr_id,
        intent.intent_id,
      ]);
    },

    intentOf: async (crId: string): Promise<MergeIntent | undefined> =>
      (await sql.query<MergeIntent>(`select ${INTENT_COLUMNS} from cr_merge_intents where cr_id = $1`, [crId]))[0],

    /** Every intent: the repair's one query when nothing needs it (a table nearly always empty). */
    intents: () => sql.query<MergeIntent>(`select ${INTENT_COLUMNS} from cr_merge_intents order by created_at`),
  };
}

export type ChangeRequestStore = ReturnType<typeof createChangeRequestStore>;
