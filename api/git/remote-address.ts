import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

/** The host git connects to for a repository URL, and the port. */
export type RemoteHost = { scheme: "http" | "https" | "ssh" | "git"; host: string; port: number };

/** Allowed, with what the host resolved to (none when the stack allows it by name: git resolves it then). */
export type RemoteVerdict = { ok: true; remote: RemoteHost; addresses: string[] } | { ok: false; reason: string };

/** Where a repository URL may lead: checked at project creation and before every network operation on a remote. */
export type RemoteAddressCheck = (url: string) => Promise<RemoteVerdict>;

const DEFAULT_PORTS: Record<RemoteHost["scheme"], number> = { http: 80, https: 443, ssh: 22, git: 9418 };
const LOOKUP_TIMEOUT_MS = 5000;

// Stricter than a URL parser on purpose: at most one `@` and no empty port, so git cannot read another host out of
// the authority than the one checked here. What does not match is refused.
const URL_FORM = /^(https?|ssh|git):\/\/(?:[^@/?#]*@)?(\[[0-9A-Fa-f:.]+\]|[^@/?#:[\]]+)(?::(\d{1,5}))?(?:[/?#]|$)/;
const SCP_FORM = /^[^@/:]+@(\[[0-9A-Fa-f:.]+\]|[^@/:[\]]+):/;

/**
 * Addresses no repository may be at unless the stack allows the host: the first matching kind names it. Metadata
 * endpoints come before the ranges holding them, so the message says what they are. IPv4-mapped IPv6 addresses
 * (`::ffff:127.0.0.1`) match their IPv4 range (BlockList does that).
 */
const FORBIDDEN: [kind: string, subnets: [string, number][]][] = [
  [
    "a cloud metadata address",
    [
      ["169.254.169.254", 32],
      ["fd00:ec2::254", 128],
      ["100.100.100.200", 32],
      ["192.0.0.192", 32],
    ],
  ],
  [
    "a loopback address",
    [
      ["127.0.0.0", 8],
      ["::1", 128],
    ],
  ],
  [
    "an unspecified address",
    [
      ["0.0.0.0", 8],
      ["::", 128],
    ],
  ],
  [
    "a private address",
    [
      ["10.0.0.0", 8],
      ["172.16.0.0", 12],
      ["192.168.0.0", 16],
      ["fc00::", 7],
      ["fec0::", 10],
    ],
  ],
  [
    "a link-local address",
    [
      ["169.254.0.0", 16],
      ["fe80::", 10],
    ],
  ],
  ["a carrier-grade NAT address", [["100.64.0.0", 10]]],
  [
    "a multicast or reserved address",
    [
      ["224.0.0.0", 3],
      ["ff00::", 8],
    ],
  ],
];

const BLOCKS = FORBIDDEN.map(([kind, subnets]) => {
  const list = new BlockList();
  for (const [net, prefix] of subnets) list.addSubnet(net, prefix, isIP(net) === 6 ? "ipv6" : "ipv4");
  return { kind, list };
});

/** What kind of forbidden address `address` is, or undefined for a public one. */
export function forbiddenKind(address: string): string | undefined {
  const type = isIP(address) === 6 ? "ipv6" : "ipv4";
  return BLOCKS.find((b) => b.list.check(address, type))?.kind;
}

/** The host and port git will connect to for an accepted repository URL (protocol/project.ts `isAllowedRepoUrl`). */
export function remoteHostOf(url: string): RemoteHost | undefined {
  const full = URL_FORM.exec(url);
  if (full) {
    const scheme = full[1] as RemoteHost["scheme"];
    return { scheme, host: unbracket(full[2]!), port: full[3] ? Number(full[3]) : DEFAULT_PORTS[scheme] };
  }
  const scp = SCP_FORM.exec(url);
  return scp ? { scheme: "ssh", host: unbracket(scp[1]!), port: DEFAULT_PORTS.ssh } : undefined;
}

const unbracket = (host: string) => host.replace(/^\[(.*)\]$/, "$1").toLowerCase();

/** The host as a URL and SVC_REPO_ALLOWED_HOSTS write it: an IPv6 address in brackets. */
const hostLabel = (host: string) => (isIP(host) === 6 ? `[${host}]` : host);

/** getaddrinfo, as git's own connect resolves, bounded: a lookup cannot be cancelled, only stopped waiting for. */
async function resolve(host: string, timeoutMs: number): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error("timed out"), { code: "ETIMEOUT" })), timeoutMs);
  });
  try {
    const found = await Promise.race([lookup(host, { all: true }), timeout]);
    return found.map((a) => a.address);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Refuses repository URLs whose host resolves to a loopback, private, link-local, metadata or otherwise non-public
 * address (any one of its addresses), unless SVC_REPO_ALLOWED_HOSTS names the host or `host:port`: otherwise
 * anyone who may create a project could make the API connect inside its own network.
 */
export function createRemoteAddressCheck(options: {
  /** SVC_REPO_ALLOWED_HOSTS: `host` or `host:port` entries (IPv6 in brackets), trusted whatever they resolve to. */
  allowedHosts: readonly string[];
  lookupTimeoutMs?: number;
}): RemoteAddressCheck {
  const allowed = new Set(options.allowedHosts.map((h) => h.toLowerCase()));
  return async (url) => {
    const remote = remoteHostOf(url);
    if (!remote) return { ok: false, reason: "svc cannot tell which host this repository URL names" };
    const label = hostLabel(remote.host);
    if (allowed.has(label) || allowed.has(`${label}:${remote.port}`)) return { ok: true, remote, addresses: [] };
    let addresses: string[];
    try {
      addresses = await resolve(remote.host, options.lookupTimeoutMs ?? LOOKUP_TIMEOUT_MS);
    } catch (err) {
      return { ok: false, reason: `the host ${label} cannot be resolved (${(err as NodeJS.ErrnoException).code})` };
    }
    const kind = addresses.map(forbiddenKind).find((k) => k !== undefined);
    if (!kind) return { ok: true, remote, addresses };
    // Suggest the one port: allowing a whole host would open all its ports again.
    return {
      ok: false,
      reason:
        `${isIP(remote.host) ? `the host ${label} is` : `the host ${label} resolves to`} ${kind}, where repositories ` +
        `are refused unless the stack allows it: svc self-host env set SVC_REPO_ALLOWED_HOSTS=${label}:${remote.port} ` +
        "(comma-separated, with the hosts it already lists), then svc self-host restart",
    };
  };
}

/**
 * Git configuration that makes an http(s) remote's connection go to the addresses just checked (`http.curloptResolve`,
 * git >= 2.37), so a DNS answer changed in between (rebinding) is never used. ssh and git:// have no such knob:
 * for them the check right before the command is all there is.
 */
export function pinnedAddresses(verdict: Extract<RemoteVerdict, { ok: true }>): [string, string][] {
  const { remote, addresses } = verdict;
  if (remote.scheme !== "http" && remote.scheme !== "https") return [];
  if (addresses.length === 0 || isIP(remote.host)) return [];
  return [["http.curloptResolve", `${remote.host}:${remote.port}:${addresses.map(hostLabel).join(",")}`]];
}
