import type { Command } from "commander";
import { ChangeRequestEnvelope } from "../../protocol/change-request.ts";
import { CrApproval } from "../../protocol/cr-approval.ts";
import { parseCrRef } from "../cr-ref.ts";
import { info, printJson, printLine } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";

/** `svc cr approve`: a person's approval of a CR's current head, added to `svc cr`. */
export function approvalCommands(cr: Command): void {
  cr.command("approve")
    .description("approve a change request's current head (a push to it later asks for approval again)")
    .argument("<cr>", "number (3 or #3) or id")
    .addOption(projectOption())
    .option("--json", "output JSON (the approval)")
    .action(async (ref: string, _o, cmd: Command) => {
      const id = parseCrRef(ref);
      const { opts, ctx, path } = projectCommand(cmd, "change-requests");
      const approval = await ctx.client.request("POST", path(`/${id}/approve`), CrApproval, { body: {} });
      if (opts.json) return printJson(approval);
      // Read after the approval: the count is what the merge gate sees now, this approval included.
      const { change_request: after } = await ctx.client.request("GET", path(`/${id}`), ChangeRequestEnvelope);
      info(
        `✓ approved CR #${after.number} at ${approval.head_sha.slice(0, 12)}: ` +
          `${after.approvals}/${after.required_approvals} approvals`,
      );
      printLine(approval.head_sha);
    });
}
