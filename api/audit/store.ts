import type { AuditActorKind, AuditEvent, AuditList, AuditQuery } from "../../protocol/audit.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

/** One act to record, in every account of `accountIds` (a user token's mint reaches all of its user's accounts). */
export type AuditEntry = {
  accountIds: string[];
  actor: { userId: string; kind: AuditActorKind };
  action: string;
  resource: { type: string; id: string | null };
  projectId: string | null;
  requestId: string | null;
  clientAddress: string | null;
  status: number | null;
  /** Names only: never a value a client sent. */
  details: AuditEvent["details"];
};

type Row = {
  id: string;
  at: Date;
  actor_user_id: string;
  actor_email: string | null;
  actor_kind: AuditActorKind;
  action: string;
  resource_type: string;
  resource_id: string | null;
  project_id: string | null;
  request_id: string | null;
  client_address: string | null;
  status: number | null;
  details: AuditEvent["details"];
};

/** The accounts' audit logs: written and read, never changed (the table's triggers refuse that too). */
export function createAuditLog(sql: Sql) {
  return {
    async record(entry: AuditEntry): Promise<void> {
      if (entry.accountIds.length === 0) return;
      await sql.query(
        `insert into audit_events (account_id, actor_user_id, actor_email, actor_kind, action, resource_type,
           resource_id, project_id, request_id, client_address, status, details)
         select account_id, $2::uuid, (select email from users where id = $2::uuid), $3, $4, $5, $6, $7, $8, $9, $10,
           $11::text::jsonb
         from unnest($1::uuid[]) as account_id`,
        [
          entry.accountIds,
          entry.actor.userId,
          entry.actor.kind,
          entry.action,
          entry.resource.type,
          entry.resource.id,
          entry.projectId,
          entry.requestId,
          entry.clientAddress,
          entry.status,
          JSON.stringify(entry.details),
        ],
      );
    },

    /** Newest first, `limit` at most, older than `before` when given. */
    async list(accountId: string, query: AuditQuery): Promise<AuditList> {
      const rows = await sql.query<Row>(
        `select id::text as id, at, actor_user_id, actor_email, actor_kind, action, resource_type, resource_id,
           project_id, request_id, client_address, status, details
         from audit_events where account_id = $1 and ($2::bigint is null or id < $2::bigint)
         order by id desc limit $3`,
        [accountId, query.before ?? null, query.limit + 1],
      );
      const page = rows.slice(0, query.limit).map(
        (r): AuditEvent => ({
          id: Number(r.id),
          at: iso(r.at),
          actor: { user_id: r.actor_user_id, email: r.actor_email, kind: r.actor_kind },
          action: r.action,
          resource: { type: r.resource_type, id: r.resource_id },
          project_id: r.project_id,
          request_id: r.request_id,
          client_address: r.client_address,
          status: r.status,
          details: r.details,
        }),
      );
      return { events: page, next_before: rows.length > query.limit ? page.at(-1)!.id : null };
    },
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
