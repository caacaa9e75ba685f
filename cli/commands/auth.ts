import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { Command } from "commander";
import { Me } from "../../protocol/account.ts";
import { createApiClient } from "../api-client.ts";
import { readConfig, updateConfig } from "../config-file.ts";
import { optionsOf, resolveContext } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { apiBase, findHost, loginHint, normalizeHostUrl } from "../hosts.ts";
import { info, printJson, printLine } from "../output.ts";
import { dashboardUrl } from "./projects.ts";

const LOGIN_TIMEOUT_MS = 5 * 60_000;

/** Browser login: a one-shot callback on 127.0.0.1 with a random state; the URL is printed for headless users. */
async function browserLogin(hostUrl: string): Promise<string> {
  const state = randomBytes(16).toString("hex");
  return new Promise((resolve, reject) => {
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      if (url.pathname !== "/callback") return res.writeHead(404).end();
      if (url.searchParams.get("state") !== state) return res.writeHead(400).end("state mismatch");
      const token = url.searchParams.get("token");
      if (!token) return res.writeHead(400).end("missing token");
      res.writeHead(200, { "content-type": "text/plain" }).end("svc: logged in. You can close this tab.\n");
      server.close();
      resolve(token);
    });
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      const callback = `http://127.0.0.1:${port}/callback`;
      info(
        `open this URL to authorize the CLI:\n  ${dashboardUrl(hostUrl)}/cli/login?callback=${encodeURIComponent(callback)}&state=${state}`,
      );
    });
    setTimeout(() => {
      server.close();
      reject(new CliError("login timed out; use 'svc login --token <pat>' on headless machines"));
    }, LOGIN_TIMEOUT_MS).unref();
  });
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
  if (!token && !process.stdin.isTTY) throw usageError("--token is required when not interactive");
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
    .description("log in to a host (browser flow, or --token on headless machines)")
    .option("--token <pat>", "a svc_pat_ token")
    .option("--api <url>", "API URL for the host")
    .option("--json", "output JSON: host, user, account")
    .action(async (_o, cmd: Command) => {
      const opts = optionsOf<{ token?: string; api?: string; host?: string; json?: boolean }>(cmd);
      const config = readConfig();
      const name = opts.host ?? config.active_host;
      const url = opts.api ? normalizeHostUrl(opts.api) : findHost(config, name)?.url;
      if (!url) throw new CliError(`unknown host '${name}'; give --api <url> or 'svc hosts add'`);
      const me = await loginTo(name, url, opts.token, { quiet: opts.json });
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
