import { realpathSync } from "node:fs";
import { Command } from "commander";
import { execa } from "execa";
import { readConfig } from "../config-file.ts";
import { listHosts } from "../hosts.ts";

/** The `key=value` lines git sends a credential helper, up to the blank line that ends them. */
async function readRequest(): Promise<Map<string, string>> {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  const fields = new Map<string, string>();
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return fields;
}

const originOf = (url: string) => {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
};

/**
 * The stored login for the host serving `origin`: the active host first when several share it. Nothing when the
 * CLI is not logged in there, so git goes on to its next helper or asks.
 */
function tokenFor(origin: string): string | undefined {
  const config = readConfig();
  const matches = listHosts(config).filter((h) => h.logged_in && originOf(h.url) === origin);
  const host = matches.find((h) => h.active) ?? matches[0];
  return host && config.hosts[host.name]?.token;
}

/**
 * `svc git-credential get|store|erase`: git's credential-helper protocol for the hosts the CLI knows, the way
 * `gh auth git-credential` does it. Only `get` answers; the token stays in the CLI's config, never in git's.
 */
export function gitCredentialCommand(): Command {
  return new Command("git-credential")
    .description("git credential helper for the hosts svc is logged in to (set up by 'svc ship')")
    .argument("<operation>", "get, store or erase (git calls this)")
    .action(async (operation: string) => {
      const request = await readRequest();
      if (operation !== "get") return;
      const protocol = request.get("protocol");
      const host = request.get("host");
      if (!protocol || !host) return;
      const origin = originOf(`${protocol}://${host}`);
      const token = origin && tokenFor(origin);
      if (!token) return;
      process.stdout.write(`protocol=${protocol}\nhost=${host}\nusername=svc\npassword=${token}\n`);
    });
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Makes plain git (`git pull svc main`, `git push svc`) authenticate to `origin` through this CLI: an empty helper
 * first drops any other helper for that origin (no keychain keeps a copy of the token), then this binary.
 */
export async function setUpGitCredential(repoRoot: string, origin: string): Promise<void> {
  const key = `credential.${origin}.helper`;
  const helper = `!${shellQuote(process.execPath)} ${shellQuote(realpathSync(process.argv[1]!))} git-credential`;
  const current = await execa("git", ["config", "--local", "--get-all", key], { cwd: repoRoot, reject: false });
  if (current.stdout === `\n${helper}`) return;
  await execa("git", ["config", "--local", "--unset-all", key], { cwd: repoRoot, reject: false });
  await execa("git", ["config", "--local", "--add", key, ""], { cwd: repoRoot });
  await execa("git", ["config", "--local", "--add", key, helper], { cwd: repoRoot });
}
