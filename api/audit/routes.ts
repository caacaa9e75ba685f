import type { FastifyInstance } from "fastify";
import { type AuditList, AuditQuery } from "../../protocol/audit.ts";
import { parseInput } from "../http/validate.ts";
import type { AuditLog } from "./store.ts";

/** `GET /v1/accounts/audit`: the active account's log, newest first (`svc audit`). */
export function auditRoutes(deps: { audit: AuditLog }) {
  return async (app: FastifyInstance) => {
    app.get(
      "/v1/accounts/audit",
      { config: { auth: "account" } },
      async (req): Promise<AuditList> => deps.audit.list(req.account!.id, parseInput(AuditQuery, req.query, "query")),
    );
  };
}
