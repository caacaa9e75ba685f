import { readConfig } from "./config-file.ts";
import { CliError, EXIT_FAILURE } from "./errors.ts";
import { listHosts } from "./hosts.ts";

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
export async function answerGitCredential(operation: string): Promise<void> {
  const request = await readRequest();
  if (operation !== "get") return;
  const protocol = request.get("protocol");
  const host = request.get("host");
  if (!protocol || !host) return;
  const origin = originOf(`${protocol}://${host}`);
  const token = origin && tokenFor(origin);
  if (!token) return;
  process.stdout.write(`protocol=${protocol}\nhost=${host}\nusername=svc\npassword=${token}\n`);
}

/**
 * The helper as git runs it (cli/main.ts), without the command parser: git runs it for every fetch and push to an
 * svc host. Errors as the parser's path reports them.
 */
export async function runGitCredentialHelper(operation: string): Promise<number> {
  try {
    await answerGitCredential(operation);
    return 0;
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    return err instanceof CliError ? err.exitCode : EXIT_FAILURE;
  }
}
