import type { Command } from "commander";
import { type ApiClient, createApiClient } from "./api-client.ts";
import { type CliSettings, readCliEnv } from "./config.ts";
import { readConfig } from "./config-file.ts";
import { CliError } from "./errors.ts";
import { apiBase, findHost, loginHint, unreachableHint } from "./hosts.ts";
import { findLink } from "./link-file.ts";
import { info } from "./output.ts";

export type GlobalOptions = { host?: string; verbose?: boolean; project?: string };

export type Context = {
  hostName: string;
  hostUrl: string;
  token: string;
  client: ApiClient;
  verbose: boolean;
};

const say = (verbose: boolean | undefined, msg: string) => {
  if (verbose) info(msg);
};

/**
 * Which API and which token (SPEC "Host resolution order" and "CLI token lookup"): `--host`, then the link
 * file's host, then the active host; `SVC_API_URL` overrides the URL; SVC_CLI_TOKEN, then SVC_EXECUTOR_TOKEN,
 * then the host's stored token. SVC_TOKEN is never read.
 */
export function resolveContext(
  opts: GlobalOptions,
  options: { quiet?: boolean } = {},
  env: CliSettings = readCliEnv(),
): Context {
  const config = readConfig();
  const link = findLink();
  const hostName = opts.host ?? link?.link.host ?? config.active_host;
  say(opts.verbose, `host: ${hostName} (from ${opts.host ? "--host" : link ? link.path : "the active host"})`);
  const host = findHost(config, hostName);
  if (!host && !env.apiUrl) throw new CliError(`unknown host '${hostName}'; see 'svc hosts ls'`);
  const apiUrl = env.apiUrl ?? apiBase(host!.url);
  if (env.apiUrl) say(opts.verbose, `api: ${apiUrl} (from SVC_API_URL)`);
  const token = env.cliToken || env.executorToken || host?.token;
  const tokenSource = env.cliToken ? "SVC_CLI_TOKEN" : env.executorToken ? "SVC_EXECUTOR_TOKEN" : "the stored login";
  if (!token) throw new CliError(`not logged in to ${hostName}; ${loginHint(hostName)}`);
  say(opts.verbose, `token: from ${tokenSource}`);
  if (!options.quiet) info(`host: ${hostName} (${apiUrl.replace(/\/v1$/, "")})`);
  return {
    hostName,
    hostUrl: host?.url ?? apiUrl.replace(/\/v1$/, ""),
    token,
    client: createApiClient({
      baseUrl: apiUrl,
      token,
      unreachableHint: unreachableHint(hostName, apiUrl),
      unauthorizedHint: tokenSource === "the stored login" ? `to log in again, ${loginHint(hostName)}` : undefined,
      // The account chosen for the stored login; another token is another person's, whose first account it is.
      account: tokenSource === "the stored login" ? host?.account : undefined,
    }),
    verbose: Boolean(opts.verbose),
  };
}

/** The root and command options merged, as every action sees them. */
export function optionsOf<T>(cmd: Command): T & GlobalOptions {
  return cmd.optsWithGlobals() as T & GlobalOptions;
}
