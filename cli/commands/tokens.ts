import { Command } from "commander";
import { z } from "zod";
import { Token, TokenList } from "../../protocol/token.ts";
import { optionsOf, resolveContext } from "../context.ts";
import { usageError } from "../errors.ts";
import { info, printJson } from "../output.ts";
import { printTable } from "../table.ts";

/** What a token is, as a person tells them apart: a session's own token is a project token bound to a sandbox. */
const kindOf = (token: Token) => (token.session_id ? "session" : token.kind);

async function list(cmd: Command): Promise<void> {
  const opts = optionsOf<{ json?: boolean }>(cmd);
  const { tokens } = await resolveContext(opts).client.request("GET", "/accounts/tokens", TokenList);
  if (opts.json) return printJson(tokens);
  printTable(
    tokens.map((t) => [
      t.id,
      t.name || "-",
      kindOf(t),
      t.prefix,
      t.project_id ?? "-",
      t.last_used_at ?? "never",
      t.expires_at,
    ]),
    { header: ["ID", "NAME", "KIND", "PREFIX", "PROJECT", "LAST USED", "EXPIRES"] },
  );
}

/**
 * `svc tokens`: the logged-in user's tokens (user tokens, project tokens they minted, their sessions' tokens while
 * those run), each with its expiry; `revoke` ends one at once. Account routes: a user token only.
 */
export function tokensCommand(): Command {
  const tokens = new Command("tokens")
    .description("your API tokens and when they expire (lists them)")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => list(cmd));

  tokens
    .command("ls")
    .description("your tokens that still work: id, name, kind, prefix, project, last use, expiry")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => list(cmd));

  tokens
    .command("revoke")
    .description("revoke one of your tokens at once (a login using it is logged out)")
    .argument("<id>", "the token's id, as `svc tokens ls` prints it")
    .action(async (id: string, _o, cmd: Command) => {
      if (!Token.shape.id.safeParse(id).success) throw usageError(`'${id}' is not a token id; see 'svc tokens ls'`);
      await resolveContext(optionsOf(cmd)).client.request("DELETE", `/accounts/tokens/${id}`, z.undefined());
      info(`✓ revoked token ${id}`);
    });
  return tokens;
}
