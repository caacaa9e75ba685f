import type { CrComment, CrCommentDelivery, CrCommentKind } from "../../protocol/cr-comment.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

type Row = Omit<CrComment, "created_at"> & { created_at: Date | string };

/** The author as people read it: a session's agent by its session, a person by their email. */
const SELECT = `select c.id, c.cr_id, c.kind,
    case when c.author_session_id is not null then 'session ' || c.author_session_id
         else coalesce(u.email, 'a removed user') end as author,
    c.author_session_id, c.body, c.path, c.line, c.head_sha, c.to_agent, c.session_id, c.delivery, c.delivery_error,
    c.created_at
  from cr_comments c left join users u on u.id = c.author_id`;

const toComment = (row: Row): CrComment => ({ ...row, created_at: iso(row.created_at) });

export type NewCrComment = {
  crId: string;
  kind: CrCommentKind;
  authorId: string;
  authorSessionId: string | null;
  body: string;
  path: string | null;
  line: number | null;
  headSha: string | null;
  /** The session that takes it as a prompt: set exactly for comments sent to the agent. */
  sessionId: string | null;
};

/** CR comments (migration 0021). */
export function createCrCommentStore(sql: Sql) {
  const byId = async (id: string) => {
    const [row] = await sql.query<Row>(`${SELECT} where c.id = $1`, [id]);
    return row && toComment(row);
  };
  return {
    async create(comment: NewCrComment): Promise<CrComment> {
      const toAgent = comment.sessionId !== null;
      const [row] = await sql.query<{ id: string }>(
        `insert into cr_comments (cr_id, kind, author_id, author_session_id, body, path, line, head_sha, to_agent,
           session_id, delivery)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) returning id`,
        [
          comment.crId,
          comment.kind,
          comment.authorId,
          comment.authorSessionId,
          comment.body,
          comment.path,
          comment.line,
          comment.headSha,
          toAgent,
          comment.sessionId,
          toAgent ? "pending" : null,
        ],
      );
      return (await byId(row!.id))!;
    },

    byId,

    async list(crId: string): Promise<CrComment[]> {
      return (await sql.query<Row>(`${SELECT} where c.cr_id = $1 order by c.seq`, [crId])).map(toComment);
    },

    /**
     * The newest session a comment of this CR went to that still exists on the CR's head branch: the agent a CR
     * without an origin session got, which takes the next comment too.
     */
    async feedbackSession(crId: string, headRef: string): Promise<string | undefined> {
      const [row] = await sql.query<{ session_id: string }>(
        `select c.session_id from cr_comments c join project_sessions s on s.session_id = c.session_id
         where c.cr_id = $1 and s.branch = $2 order by c.seq desc limit 1`,
        [crId, headRef],
      );
      return row?.session_id;
    },

    async setDelivery(id: string, delivery: CrCommentDelivery, error: string | null = null): Promise<void> {
      await sql.query("update cr_comments set delivery = $2, delivery_error = $3 where id = $1", [id, delivery, error]);
    },
  };
}

export type CrCommentStore = ReturnType<typeof createCrCommentStore>;
