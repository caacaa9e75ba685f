import { AccountRole } from "../../protocol/account.ts";
import type { ChangeRequestRecord } from "../../protocol/change-request.ts";
import type { CrApproval } from "../../protocol/cr-approval.ts";
import { atLeast } from "../auth/roles.ts";
import { leastRole } from "../auth/route-roles.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { createTtlCache } from "../ttl-cache.ts";

type Row = Omit<CrApproval, "created_at"> & { created_at: Date | string };

/** The roles that may approve: those the approve route admits (the one table of who may do what). */
const APPROVER_ROLES = AccountRole.options.filter((role) =>
  atLeast(role, leastRole("POST /v1/projects/:projectId/change-requests/:crId/approve")),
);

/**
 * Whether approval `a`'s person may still approve ($3: APPROVER_ROLES): someone removed from the CR's account, or
 * given a role that may not approve, since approving no longer counts.
 */
const STILL_MAY_APPROVE = `exists (select 1 from memberships m join change_requests c on c.account_id = m.account_id
  where c.cr_id = a.cr_id and m.user_id = a.user_id and m.role = any($3::text[]))`;

/** A CR and the head its approvals count for: its current one. */
export type ApprovedCr = Pick<ChangeRequestRecord, "cr_id" | "head_commit_sha">;

/**
 * How long a CR's count of approvals, as a CR read shows it, is served from memory: every CR read would otherwise
 * pay a query joining memberships. An approval made in this process shows at once; another replica's within this.
 * The merge gate never reads it (it counts afresh).
 */
const SHOWN_COUNT_MS = 2000;

/** CR approvals (migration 0025). */
export function createApprovalStore(sql: Sql) {
  const shownCounts = createTtlCache<string, number>(SHOWN_COUNT_MS);
  const headKey = (cr: ApprovedCr) => `${cr.cr_id}:${cr.head_commit_sha}`;
  const list = async (cr: ApprovedCr): Promise<CrApproval[]> =>
    (
      await sql.query<Row>(
        `select coalesce(u.email, 'a removed user') as "user", a.user_id, a.head_sha,
           (a.head_sha = $2 and ${STILL_MAY_APPROVE}) is true as counted, a.created_at
         from cr_approvals a left join users u on u.id = a.user_id
         where a.cr_id = $1 order by a.seq`,
        [cr.cr_id, cr.head_commit_sha, APPROVER_ROLES],
      )
    ).map((row) => ({ ...row, created_at: iso(row.created_at) }));

  /** How many approvals count for each CR's current head, by CR id, in one query; a CR with none is absent. */
  async function counted(crs: readonly ApprovedCr[]): Promise<Map<string, number>> {
    const heads = crs.flatMap((cr) => (cr.head_commit_sha ? [`${cr.cr_id}:${cr.head_commit_sha}`] : []));
    if (heads.length === 0) return new Map();
    const rows = await sql.query<{ cr_id: string; n: number }>(
      `select a.cr_id, count(*)::int as n from cr_approvals a
       where a.cr_id = any($1::uuid[]) and (a.cr_id::text || ':' || a.head_sha) = any($2::text[])
         and ${STILL_MAY_APPROVE}
       group by a.cr_id`,
      [crs.map((cr) => cr.cr_id), heads, APPROVER_ROLES],
    );
    return new Map(rows.map((r) => [r.cr_id, r.n]));
  }

  return {
    list,

    counted,

    /** `counted` as a CR read shows it: from memory for SHOWN_COUNT_MS, the CRs not held there in one query. */
    async shownCounts(crs: readonly ApprovedCr[]): Promise<Map<string, number>> {
      // The CRs not held in memory share one query, made only if one of them is asked for.
      let fresh: Promise<Map<string, number>> | undefined;
      const load = () => {
        fresh ??= counted(crs);
        return fresh;
      };
      const counts = await Promise.all(
        crs.map((cr) =>
          cr.head_commit_sha ? shownCounts.get(headKey(cr), async () => (await load()).get(cr.cr_id) ?? 0) : 0,
        ),
      );
      return new Map(crs.map((cr, i) => [cr.cr_id, counts[i]!]));
    },

    /** Records `userId`'s approval of `headSha`; `created` false when it was there already (approving is idempotent). */
    async approve(
      cr: ApprovedCr,
      userId: string,
      headSha: string,
    ): Promise<{ approval: CrApproval; created: boolean }> {
      const inserted = await sql.query(
        "insert into cr_approvals (cr_id, user_id, head_sha) values ($1, $2, $3) on conflict do nothing returning 1",
        [cr.cr_id, userId, headSha],
      );
      shownCounts.delete(headKey({ cr_id: cr.cr_id, head_commit_sha: headSha }));
      const approval = (await list({ ...cr, head_commit_sha: headSha })).find(
        (a) => a.user_id === userId && a.head_sha === headSha,
      );
      return { approval: approval!, created: inserted.length > 0 };
    },
  };
}

export type ApprovalStore = ReturnType<typeof createApprovalStore>;
