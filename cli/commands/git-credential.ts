import { realpathSync } from "node:fs";
import { Command } from "commander";
import { execa } from "execa";
import { answerGitCredential } from "../git-credential-helper.ts";

/** `svc git-credential get|store|erase` (cli/git-credential-helper.ts), as the parser sees it. */
export function gitCredentialCommand(): Command {
  return new Command("git-credential")
    .description("git credential helper for the hosts svc is logged in to (set up by 'svc ship')")
    .argument("<operation>", "get, store or erase (git calls this)")
    .action(answerGitCredential);
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
