import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { Command } from "commander";
import { Me } from "../../protocol/account.ts";
import { Email } from "../../protocol/member.ts";
import { MintedToken } from "../../protocol/token.ts";
import { createApiClient } from "../api-client.ts";
import { openBrowser } from "../browser.ts";
import { readConfig, updateConfig } from "../config-file.ts";
import { optionsOf, resolveContext } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { apiBase, findHost, loginHint, normalizeHostUrl } from "../hosts.ts";
import { info, printJson, printLine } from "../output.ts";
import { notInteractive } from "../picker.ts";
import { askSecret, interactive, readStdin } from "../prompt.ts";
import { dashboardUrl } from "./projects.ts";

const LOGIN_TIMEOUT_MS = 5 * 60_000;

/**
 * Browser login, as `gh auth login --web` does it: a one-shot callback on 127.0.0.1 (random port) with a random
 * `state`; the authorize URL goes to stderr and to `$BROWSER`/`xdg-open` when there is one; without either it
 * waits for the person to open the URL elsewhere.
 */
async function browserLogin(hostUrl: string): Promise<string> {
  const state = randomBytes(16).toString("hex");
  return new Promise((resolve, reject) => {
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      if (url.pathname !== "/callback") return res.writeHead(404).end();
      if (url.searchParams.get("state") !== state) return res.writeHead(400).end("svc: state mismatch\n");
      const token = url.searchParams.get("token");
      if (!token) return res.writeHead(400).end("svc: missing token\n");
      res.writeHead(200, { "content-type": "text/plain" }).end("svc: logged in. You can close this tab.\n");
      clearTimeout(timer);
      server.close();
      resolve(token);
    });
    const timer = setTimeout(() => {
      server.close();
      reject(
        new CliError(
          `login timed out after ${LOGIN_TIMEOUT_MS / 60_000} minutes with no authorization; try again, or use 'svc login --token <pat>'`,
        ),
      );
    }, LOGIN_TIMEOUT_MS);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      const callback = `http://127.0.0.1:${port}/callback`;
      const url = `${dashboardUrl(hostUrl)}/dashboard/cli/login?callback=${encodeURIComponent(callback)}&state=${state}`;
      info(`open this URL in a browser signed in to ${hostUrl} to authorize the CLI:\n  ${url}`);
      info(openBrowser(url) ? "opened it in your browser; waiting…" : "waiting for the authorization…");
    });
  });
}

/**
 * `svc login --email`: the password typed at the terminal without echo (or piped with --password-stdin), traded for
 * a user token as a browser login would mint it. Asked before any request; nothing of it is stored.
 */
async function passwordLogin(url: string, email: string, fromStdin: boolean): Promise<string> {
  if (!fromStdin && !interactive())
    throw notInteractive("--password-stdin", `echo "$PASSWORD" | svc login --email ${email} --password-stdin`);
  const password = fromStdin ? await readStdin() : await askSecret(`Password for ${email}: `, { trim: false });
  if (!password) throw usageError("no password given");
  const client = createApiClient({ baseUrl: apiBase(url), token: undefined });
  const minted = await client.request("POST", "/auth/password", MintedToken, { body: { email, password } });
  return minted.token;
}

async function verify(url: string, token: string) {
  return createApiClient({ baseUrl: apiBase(url), token }).request("GET", "/accounts/me", Me);
}

/** Logs in to `name` at `url` (browser flow unless a token is given) and makes it the active host. */
export async function loginTo(
  name: string,
  url: string,
  token: string | undefined,
  options: { quiet?: boolean } = {},
): Promise<Me> {
  const secret = token ?? (await browserLogin(url));
  const me = await verify(url, secret);
  updateConfig((c) => {
    c.hosts[name] = { url, token: secret };
    c.active_host = name;
  });
  if (!options.quiet) info(`✓ logged in to ${name} as ${me.user.email} (account ${me.account.slug})`);
  return me;
}

export function authCommands(): Command[] {
  const login = new Command("login")
    .description("log in to a host (browser flow, --email and a password, or --token on headless machines)")
    .option("--token <pat>", "a svc_pat_ token")
    .option("--email <email>", "log in with your email and password (the password is asked at the terminal)")
    .option("--password-stdin", "with --email: read the password from stdin")
    .option("--api <url>", "API URL for the host")
    .option("--json", "output JSON: host, user, account")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<{
        token?: string;
        email?: string;
        passwordStdin?: boolean;
        api?: string;
        host?: string;
        json?: boolean;
      }>(cmd);
      if (opts.token && opts.email) throw usageError("give --token or --email, not both");
      if (opts.passwordStdin && !opts.email) throw usageError("--password-stdin goes with --email");
      const email = opts.email === undefined ? undefined : Email.safeParse(opts.email);
      if (email && !email.success) throw usageError(`--email: '${opts.email}' is not an email address`);
      const config = readConfig();
      const name = opts.host ?? config.active_host;
      const url = opts.api ? normalizeHostUrl(opts.api) : findHost(config, name)?.url;
      if (!url) throw new CliError(`unknown host '${name}'; give --api <url> or 'svc hosts add'`);
      const token = email ? await passwordLogin(url, email.data!, Boolean(opts.passwordStdin)) : opts.token;
      const me = await loginTo(name, url, token, { quiet: opts.json });
      if (opts.json) printJson({ host: name, url, user: me.user, account: me.account });
    });

  const logout = new Command("logout")
    .description("forget the token of the active or named host")
    .option("--json", "output JSON")
    .action((_o, cmd: Command) => {
      const opts = optionsOf<{ host?: string; json?: boolean }>(cmd);
      let name = "";
      let had = false;
      updateConfig((c) => {
        name = opts.host ?? c.active_host;
        const host = c.hosts[name];
        had = Boolean(host?.token);
        if (host) delete host.token;
      });
      if (opts.json) return printJson({ host: name, logged_out: had });
      info(had ? `✓ logged out of ${name}` : `not logged in to ${name}; nothing to do`);
      info(`to log in again, ${loginHint(name)}`);
    });

  const whoami = new Command("whoami")
    .description("the user and active account")
    .option("--json", "output JSON")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<{ json?: boolean }>(cmd);
      const me = await resolveContext(opts).client.request("GET", "/accounts/me", Me);
      if (opts.json) return printJson(me);
      printLine(`${me.user.email}\t${me.account.slug}`);
    });

  return [login, logout, whoami];
}
