import type { FastifyInstance } from "fastify";
import { AuditQuery } from "../../protocol/audit.ts";
import type { AccountStore } from "../accounts/store.ts";
import type { AuditLog } from "../audit/store.ts";
import { parseInput } from "../http/validate.ts";
import { accountSwitch } from "./pages/account-switch.ts";
import { auditPage } from "./pages/audit.ts";

export type AuditPagesDeps = { accounts: AccountStore; audit: AuditLog };

/** `/dashboard/audit` (a signed-in page; requireAccountRole checked the role in the account it shows). */
export function auditPages(deps: AuditPagesDeps) {
  return async (app: FastifyInstance) => {
    app.get("/audit", async (req, reply) => {
      const query = parseInput(AuditQuery, req.query, "query");
      const account = req.account!;
      const list = await deps.audit.list(account.id, query);
      const mine = await deps.accounts.accounts(req.browserSession!.userId);
      return reply
        .type("text/html; charset=utf-8")
        .send(
          auditPage(
            account,
            list,
            req.browserSession!.csrf,
            accountSwitch(account, mine, req.browserSession!.csrf, "/dashboard/audit"),
          ),
        );
    });
  };
}
