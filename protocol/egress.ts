import { isIPv4 } from "node:net";

/**
 * One `[sandbox] egress` entry of svc.toml, parsed: a host (name or IPv4 address), or `*.` and a domain, which
 * stands for every name under that domain but not the domain itself; with `:port`, that port only.
 */
export type EgressRule = { host: string; wildcard: boolean; port: number | null };

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

const isHostName = (host: string) => host.length <= 253 && host.split(".").every((label) => LABEL.test(label));

/** The entry as a rule, or why it is not one. Names are compared lowercase; IPv6 addresses are not taken. */
export function parseEgressEntry(entry: string): EgressRule | { error: string } {
  const match = /^(.*?)(?::(\d{1,5}))?$/.exec(entry.trim().toLowerCase());
  const [, target = "", portText] = match ?? [];
  const port = portText === undefined ? null : Number(portText);
  if (port !== null && (port < 1 || port > 65_535)) return { error: `'${entry}': the port must be 1-65535` };
  const wildcard = target.startsWith("*.");
  const host = wildcard ? target.slice(2) : target;
  if (isIPv4(host) && !wildcard) return { host, wildcard, port };
  if (!isHostName(host) || isIPv4(host)) {
    return { error: `'${entry}': a host name, '*.' and a domain, or an IPv4 address, with an optional ':port'` };
  }
  return { host, wildcard, port };
}

/**
 * Which rule lets `host:port` through: `exact` (the entry names the host) or `wildcard` (a domain's entry covers
 * it); undefined when none does.
 */
export function egressMatch(rules: EgressRule[], host: string, port: number): "exact" | "wildcard" | undefined {
  const name = host.toLowerCase().replace(/\.$/, "");
  let found: "exact" | "wildcard" | undefined;
  for (const rule of rules) {
    if (rule.port !== null && rule.port !== port) continue;
    if (!rule.wildcard && rule.host === name) return "exact";
    if (rule.wildcard && name.endsWith(`.${rule.host}`)) found = "wildcard";
  }
  return found;
}
