import type Docker from "dockerode";
import type { HostAccess, HostAccessState, NetworkOwner, SandboxEgress, SandboxNetwork } from "./driver.ts";

/** Marks the networks the driver creates (with the installation's label beside it). */
export const NETWORK_LABEL = "dev.svc.network";

/** Where a container's daemon can be reached, as the engine reports it in an inspect or a listing. */
export type ContainerAddresses = {
  /** Address on each network the container joined, by network name. */
  networks: Record<string, string>;
};

/**
 * What the sandbox joins, decided per sandbox: the network and how the host is named inside. No port is published:
 * the API reaches a container at its own address, or (SVC_SANDBOX_LINK=dial-out, the default) over the link its
 * daemon opens.
 */
export type SandboxPlacement = {
  networkId: string;
  hostAddress: string;
};

/**
 * How sandboxes meet the API. Two layouts:
 * - shared (shared-network.ts): the API runs on the host; all of an installation's sandboxes join one bridge with no
 *   inter-container traffic, which the host reaches at each container's own address.
 * - attached (attached-network.ts): the API runs in a container; each sandbox gets a small network of its own
 *   that the API containers join, so they reach its daemon directly and nothing else shares it.
 * Either way a sandbox reaches the API and the outside world, never another sandbox.
 */
export type SandboxNetworking = {
  /**
   * Where the container joins. `proxy` egress: a network with no route out (Docker's internal bridge), whose only
   * way out is the API's egress proxy.
   */
  place(owner: NetworkOwner, egress?: SandboxEgress): Promise<SandboxPlacement>;
  /** The placement's network vanished (`docker network prune`): forget what was cached about it. */
  forget(owner: NetworkOwner): void;
  /** The daemon's URL as this API process reaches it, or null when it has none (not running). */
  endpoint(addresses: ContainerAddresses, servicePort: number): string | null;
  /** After a sandbox is removed: its own network goes with it. */
  release(sandboxId: string | undefined): Promise<void>;
  /** The installation's shared networks, when sandboxes share them (the API listens on their host addresses). */
  sharedNetworks(installationId: string): Promise<SandboxNetwork[]>;
  /** SandboxDriver.limitHost: in this layout's terms. */
  limitHost(access: HostAccess): Promise<HostAccessState | undefined>;
  unlimitHost(access: Pick<HostAccess, "installationId" | "holder">): Promise<void>;
};

export const statusOf = (err: unknown) => (err as { statusCode?: number }).statusCode;

/** An IPv4 address from its 32-bit number. */
export const toAddress = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".");

/** A subnet's first address: the gateway Docker gives a bridge whose IPAM names none (a new engine's `bridge`). */
const firstAddress = (subnet: string) =>
  toAddress(
    subnet
      .split("/")[0]!
      .split(".")
      .reduce((n, octet) => n * 256 + Number(octet), 0) + 1,
  );

/** A network's IPv4 subnet and the host's address on it, named by its IPAM or, where it names none, Docker's. */
export function ipv4Gateway(info: Docker.NetworkInspectInfo | undefined): SandboxNetwork | undefined {
  const pool = info?.IPAM?.Config?.find((c) => c.Subnet && !c.Subnet.includes(":"));
  return pool?.Subnet ? { subnet: pool.Subnet, hostAddress: pool.Gateway ?? firstAddress(pool.Subnet) } : undefined;
}

export type NetworkDescription = SandboxNetwork & {
  id: string;
  /** The host's interface for it: what the host firewall matches its traffic by. */
  bridge: string;
  /** Docker's internal network: no route out. */
  internal: boolean;
};

/** The network's IPv4 gateway (the host's address on it) and subnet, its bridge interface, whether it is internal. */
export async function describeNetwork(docker: Docker, id: string): Promise<NetworkDescription> {
  const info = await docker.getNetwork(id).inspect();
  const configs: { Gateway?: string; Subnet?: string }[] = info.IPAM?.Config ?? [];
  const ipv4 = configs.find((c) => c.Gateway && c.Subnet && !c.Subnet.includes(":"));
  if (!ipv4?.Gateway || !ipv4.Subnet) throw new Error(`the sandbox network ${id} has no IPv4 gateway`);
  // The engine names a bridge after the network's id unless it was given a name.
  const bridge = info.Options?.["com.docker.network.bridge.name"] ?? `br-${info.Id.slice(0, 12)}`;
  return { id, hostAddress: ipv4.Gateway, subnet: ipv4.Subnet, bridge, internal: info.Internal === true };
}

/** The networks of that exact name (the engine's name filter matches substrings), oldest first. */
export async function networksNamed(docker: Docker, name: string): Promise<string[]> {
  const found = (await docker.listNetworks({ filters: { name: [name] } })).filter((n) => n.Name === name);
  found.sort((a, b) => Date.parse(a.Created) - Date.parse(b.Created) || a.Id.localeCompare(b.Id));
  return found.map((n) => n.Id);
}
