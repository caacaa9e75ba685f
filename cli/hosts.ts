import { z } from "zod";
import { type CliConfig, HostName } from "./config-file.ts";

/** Hosts every installation knows; users add their own next to them. */
export const BUILTIN_HOSTS: Record<string, string> = {
  cloud: "https://api.svc.dev",
  selfhost: "http://127.0.0.1:7700",
  "local-dev": "http://127.0.0.1:3000",
  "svc-internal-dev": "https://api.internal-dev.svc.dev",
};

/** Host URLs are stored as origins; the API base is the origin plus `/v1`. */
export function normalizeHostUrl(url: string): string {
  return url.replace(/\/+$/, "").replace(/\/v1$/, "");
}

export function apiBase(hostUrl: string): string {
  return `${normalizeHostUrl(hostUrl)}/v1`;
}

/** A host as the CLI shows it (`svc hosts ls --json`): never carries the token. */
const Host = z.object({
  name: HostName,
  url: z.string(),
  active: z.boolean(),
  builtin: z.boolean(),
  logged_in: z.boolean(),
});
export type Host = z.infer<typeof Host>;

export function listHosts(config: CliConfig): Host[] {
  const names = new Set([...Object.keys(BUILTIN_HOSTS), ...Object.keys(config.hosts)]);
  return [...names].map((name) => ({
    name,
    url: config.hosts[name]?.url ?? BUILTIN_HOSTS[name]!,
    active: name === config.active_host,
    builtin: name in BUILTIN_HOSTS,
    logged_in: Boolean(config.hosts[name]?.token),
  }));
}

export function findHost(
  config: CliConfig,
  name: string,
): { url: string; token?: string; account?: string } | undefined {
  const stored = config.hosts[name];
  if (stored) return stored;
  const builtin = BUILTIN_HOSTS[name];
  return builtin ? { url: builtin } : undefined;
}

/** What to try when nothing answers at the host's URL: a self-hosted stack (or any on loopback) may be down. */
export function unreachableHint(name: string, apiUrl: string): string | undefined {
  const host = URL.canParse(apiUrl) ? new URL(apiUrl).hostname : "";
  const loopback = host === "localhost" || host.startsWith("127.") || host === "[::1]";
  return name === "selfhost" || loopback ? "is the stack running? svc self-host start" : undefined;
}

/** How to get a token back for `name`: a self-host's admin login comes back with `self-host start`. */
export function loginHint(name: string): string {
  return name === "selfhost"
    ? "run 'svc self-host start' (it logs in again as the stack's admin) or 'svc login --host selfhost --token <pat>'"
    : `run 'svc login --host ${name}'`;
}
