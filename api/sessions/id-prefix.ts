import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { isUuid } from "../projects/store.ts";

/** The shortest prefix of a session id accepted where an id is (DESIGN: "any unique prefix of 6 or more"). */
export const SESSION_ID_PREFIX_MIN = 6;
const PREFIX = new RegExp(`^[0-9a-f][0-9a-f-]{${SESSION_ID_PREFIX_MIN - 1},35}$`, "i");
/** Candidates named in an ambiguity's message: enough to pick from, never a listing of the table. */
const LISTED = 10;

/**
 * The whole session id a path names: an id as it is, or the one session a prefix of 6 or more characters starts
 * (within one project, or among the projects the caller may read); a prefix of several is refused naming them (400 SESSION_ID_AMBIGUOUS), one of none
 * is passed on as given (the route answers 404 as for any unknown id). Only the projects the caller may see are
 * searched: an ambiguity never names another account's sessions.
 */
export async function resolveSessionId(
  sql: Sql,
  given: string,
  within: { projectId: string } | { mayRead: (projectId: string) => Promise<boolean> },
): Promise<string> {
  if (isUuid(given) || !PREFIX.test(given)) return given;
  const pattern = `${given.toLowerCase().replace(/[%_\\]/g, "")}%`;
  const rows =
    "projectId" in within
      ? await sql.query<{ session_id: string; project_id: string }>(
          `select session_id, project_id::text as project_id from project_sessions
           where project_id = $1 and session_id like $2 order by created_at desc limit ${LISTED + 1}`,
          [within.projectId, pattern],
        )
      : await sql.query<{ session_id: string; project_id: string }>(
          `select session_id, project_id::text as project_id from project_sessions
           where session_id like $1 order by created_at desc limit 100`,
          [pattern],
        );
  const seen = "projectId" in within ? rows : await readable(rows, within.mayRead);
  if (seen.length === 1) return seen[0]!.session_id;
  if (seen.length === 0) return given;
  const listed = seen.slice(0, LISTED).map((r) => r.session_id);
  throw apiError(
    "SESSION_ID_AMBIGUOUS",
    `session id prefix '${given}' matches ${seen.length > LISTED ? `more than ${LISTED}` : seen.length} sessions ` +
      `(${listed.join(", ")}); give more of the id`,
  );
}

async function readable<R extends { project_id: string }>(
  rows: R[],
  mayRead: (projectId: string) => Promise<boolean>,
): Promise<R[]> {
  const allowed = new Map<string, boolean>();
  const kept: R[] = [];
  for (const row of rows) {
    if (!allowed.has(row.project_id)) allowed.set(row.project_id, await mayRead(row.project_id));
    if (allowed.get(row.project_id)) kept.push(row);
  }
  return kept;
}
