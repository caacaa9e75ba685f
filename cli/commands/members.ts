import { Command } from "commander";
import { z } from "zod";
import { AccountRole } from "../../protocol/account.ts";
import { Email, Invite, Member, MemberList } from "../../protocol/member.ts";
import { optionsOf, resolveContext } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { info, printJson, printLine } from "../output.ts";
import { confirm, notInteractive } from "../picker.ts";
import { interactive } from "../prompt.ts";
import { printTable } from "../table.ts";

const ROLES = AccountRole.options.join(", ");

/** Flags and arguments checked before any request: a wrong one is a usage error (exit 2). */
function email(value: string): string {
  const parsed = Email.safeParse(value);
  if (!parsed.success) throw usageError(`'${value}' is not an email address`);
  return parsed.data;
}

function role(value: string): AccountRole {
  const parsed = AccountRole.safeParse(value);
  if (!parsed.success) throw usageError(`'${value}' is not a role; roles are ${ROLES}`);
  return parsed.data;
}

const memberPath = (address: string) => `/accounts/members/${encodeURIComponent(address)}`;

async function list(cmd: Command): Promise<void> {
  const opts = optionsOf<{ json?: boolean }>(cmd);
  const { members } = await resolveContext(opts).client.request("GET", "/accounts/members", MemberList);
  if (opts.json) return printJson(members);
  printTable(
    members.map((m) => [m.email, m.name, m.role, m.joined]),
    { header: ["EMAIL", "NAME", "ROLE", "JOINED"] },
  );
}

/**
 * `svc members`: the people of the active account and their roles (owner, admin, member, viewer). Admins invite
 * (a one-time link, 7 days), change roles and remove; only an owner makes, changes or removes an owner.
 */
export function membersCommand(): Command {
  const members = new Command("members")
    .description("the people of your account and their roles (lists them)")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => list(cmd));

  members
    .command("ls")
    .description("members of the active account: email, name, role, when they joined")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => list(cmd));

  members
    .command("invite")
    .description("invite someone by email: prints a one-time link (7 days) where they set a password and join")
    .argument("<email>", "the invitee's email: the link works for that email only")
    .option("--role <role>", `their role: ${ROLES}`, "member")
    .option("--json", "output JSON")
    .action(async (address: string, _o, cmd: Command) => {
      const opts = optionsOf<{ role: string; json?: boolean }>(cmd);
      const body = { email: email(address), role: role(opts.role) };
      const invite = await resolveContext(opts).client.request("POST", "/accounts/members/invites", Invite, { body });
      if (opts.json) return printJson(invite);
      info(
        `✓ invited ${invite.email} to ${invite.account} as ${invite.role}; send them this link (it works once, for 7 days):`,
      );
      printLine(invite.url);
    });

  members
    .command("role")
    .description("change a member's role")
    .argument("<email>", "the member's email")
    .argument("<role>", `the new role: ${ROLES}`)
    .option("--json", "output JSON")
    .action(async (address: string, newRole: string, _o, cmd: Command) => {
      const opts = optionsOf<{ json?: boolean }>(cmd);
      const body = { role: role(newRole) };
      const target = email(address);
      const member = await resolveContext(opts).client.request("PATCH", memberPath(target), Member, { body });
      if (opts.json) return printJson(member);
      info(`✓ ${member.email} is now ${member.role}`);
    });

  members
    .command("rm")
    .description("remove a member from the account (asks first, or needs --yes off a terminal)")
    .argument("<email>", "the member's email")
    .option("--yes", "do not ask for confirmation")
    .action(async (address: string, _o, cmd: Command) => {
      const opts = optionsOf<{ yes?: boolean }>(cmd);
      const target = email(address);
      if (!opts.yes) {
        if (!interactive()) throw notInteractive("--yes", `svc members rm ${target} --yes`);
        if (!(await confirm(`Remove ${target} from the account?`))) throw new CliError(`kept ${target}`);
      }
      await resolveContext(opts).client.request("DELETE", memberPath(target), z.undefined());
      info(`✓ removed ${target}`);
    });
  return members;
}
