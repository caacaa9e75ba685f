import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { forbiddenKind } from "../git/remote-address.ts";

/**
 * The address the proxy connects to for a host. `localhost` and every `*.localhost` name are this machine's loopback
 * (RFC 6761, as curl and browsers treat them): Node's resolver here knows only `localhost` itself.
 */
export async function resolveTarget(host: string): Promise<string> {
  const name = host.toLowerCase().replace(/\.$/, "");
  if (isIP(name)) return name;
  if (name === "localhost" || name.endsWith(".localhost")) return "127.0.0.1";
  return (await lookup(name)).address;
}

/**
 * Why an address is not somewhere on the internet (remote-address.ts's kinds, or one of this machine's own
 * addresses); undefined when it is. A name matched only by a `*.` entry must resolve to such a public address,
 * since whoever runs that domain's DNS chooses the answer.
 */
export function notPublic(address: string): string | undefined {
  const kind = forbiddenKind(address);
  if (kind) return kind;
  const own = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  return own.some((i) => i.address.toLowerCase() === address.toLowerCase()) ? "an address of this machine" : undefined;
}
