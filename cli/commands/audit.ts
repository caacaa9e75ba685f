import { Command, InvalidArgumentError } from "commander";
import { AUDIT_PAGE_MAX, type AuditEvent, AuditList } from "../../protocol/audit.ts";
import { optionsOf, resolveContext } from "../context.ts";
import { parsePositiveInt } from "../flag-parsers.ts";
import { info, printJson } from "../output.ts";
import { printTable } from "../table.ts";

function parseLimit(value: string): number {
  const n = parsePositiveInt(value);
  if (n > AUDIT_PAGE_MAX) throw new InvalidArgumentError(`must be at most ${AUDIT_PAGE_MAX}`);
  return n;
}

/** Who, as a person reads it: the email, and how they acted when it was not with their own login. */
function actor(e: AuditEvent): string {
  const who = e.actor.email ?? e.actor.user_id;
  return e.actor.kind === "user" ? who : `${who} (${e.actor.kind.replace("_", " ")})`;
}

/** What: the resource and its id, and the names an entry keeps (secret names, a role). */
function resource(e: AuditEvent): string {
  const names = e.details.names;
  const extra = Array.isArray(names) ? names.join(",") : (e.details.role ?? e.details.via ?? "");
  return [e.resource.type, e.resource.id, extra].filter(Boolean).join(" ");
}

/** `svc audit`: the active account's audit log, newest first (GET /v1/accounts/audit). */
export function auditCommand(): Command {
  return new Command("audit")
    .description("the active account's audit log, newest first: merges, tokens, secrets, members changed")
    .option("--limit <n>", `entries to show (default 50, at most ${AUDIT_PAGE_MAX})`, parseLimit)
    .option("--before <id>", "entries older than this one (its id in --json): the next page", parsePositiveInt)
    .option("--json", "output JSON")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<{ limit?: number; before?: number; json?: boolean }>(cmd);
      const { events } = await resolveContext(opts).client.request("GET", "/accounts/audit", AuditList, {
        query: { limit: opts.limit?.toString(), before: opts.before?.toString() },
      });
      if (opts.json) return printJson(events);
      if (events.length === 0) return info("no audit entries");
      printTable(
        events.map((e) => [e.at.replace(/\.\d+Z$/, "Z"), actor(e), e.action, resource(e)]),
        { header: ["WHEN", "ACTOR", "ACTION", "RESOURCE"] },
      );
    });
}
