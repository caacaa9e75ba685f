import { Command } from "commander";
import { type Account, Me } from "../../protocol/account.ts";
import { createApiClient } from "../api-client.ts";
import { updateConfig } from "../config-file.ts";
import { optionsOf, resolveContext } from "../context.ts";
import { CliError } from "../errors.ts";
import { info, printJson } from "../output.ts";
import { printTable } from "../table.ts";

async function list(cmd: Command): Promise<void> {
  const opts = optionsOf<{ json?: boolean }>(cmd);
  const me = await resolveContext(opts).client.request("GET", "/accounts/me", Me);
  const accounts = me.accounts.map((a) => ({ ...a, active: a.id === me.account.id }));
  if (opts.json) return printJson(accounts);
  if (accounts.length === 0) return info("you belong to no account");
  printTable(
    accounts.map((a) => [a.active ? "*" : " ", a.slug, a.name, a.role]),
    { header: ["", "SLUG", "NAME", "ROLE"] },
  );
}

/** The user's account `ref` names: by slug, then id, then name when only one has it. */
function findAccount(accounts: Account[], ref: string): Account | undefined {
  const byName = accounts.filter((a) => a.name.toLowerCase() === ref.toLowerCase());
  return (
    accounts.find((a) => a.slug === ref) ??
    accounts.find((a) => a.id === ref.toLowerCase()) ??
    (byName.length === 1 ? byName[0] : undefined)
  );
}

/**
 * `svc accounts`: the accounts the logged-in user belongs to; `use` chooses the one their account routes act on
 * (members, audit, usage, plan, the projects listed and created), stored with the host's login and sent as a header.
 */
export function accountsCommand(): Command {
  const accounts = new Command("accounts")
    .description("the accounts you belong to, marking the active one (lists them)")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => list(cmd));

  accounts
    .command("ls")
    .description("the accounts you belong to: slug, name, your role; * marks the active one")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => list(cmd));

  accounts
    .command("use")
    .description("make one of your accounts the active one on this host")
    .argument("<account>", "its slug, id or name")
    .action(async (ref: string, _o, cmd: Command) => {
      const context = resolveContext(optionsOf(cmd));
      // Without the stored choice: an account the user has left must not stand in the way of choosing another.
      const client = createApiClient({ baseUrl: context.client.baseUrl, token: context.token });
      const me = await client.request("GET", "/accounts/me", Me);
      const account = findAccount(me.accounts, ref);
      if (!account)
        throw new CliError(
          `you belong to no account '${ref}'; yours: ${me.accounts.map((a) => a.slug).join(", ") || "none"}`,
        );
      updateConfig((config) => {
        const host = config.hosts[context.hostName];
        if (!host?.token || host.token !== context.token)
          throw new CliError(`'svc accounts use' goes with a stored login; log in first ('svc login')`);
        host.account = account.id;
      });
      info(`✓ ${account.slug} is the active account on ${context.hostName}`);
    });
  return accounts;
}
