import { randomInt } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import type Docker from "dockerode";
import { createHostFirewall, firewallChain, type HostFirewall } from "../../protocol/host-firewall.ts";
import type { HostAccess, SandboxEgress, SandboxNetwork } from "./driver.ts";
import { iptables } from "./host-firewall.ts";
import {
  describeNetwork,
  NETWORK_LABEL,
  type NetworkDescription,
  networksNamed,
  type SandboxNetworking,
  type SandboxPlacement,
  statusOf,
} from "./networking.ts";
import { OWNER_LABELS } from "./owner-labels.ts";

/**
 * The bridge every sandbox of an installation joins. No inter-container traffic: the engine drops packets between
 * two containers of this bridge (iptables), so a sandbox reaches the host (host.docker.internal, the gateway) and
 * the internet, never another sandbox's ports. Ports published without an address bind the host's loopback.
 * One network per installation rather than per sandbox: the engine's default address pools hold only ~30 bridges.
 * Sandboxes whose egress goes through the API's proxy join a second one, internal (no route out, the host's
 * address on it still answers), made with the first such sandbox.
 */
const NETWORK_OPTIONS = {
  "com.docker.network.bridge.enable_icc": "false",
  "com.docker.network.bridge.host_binding_ipv4": "127.0.0.1",
};

const NETWORK_PREFIX = "svc-sandboxes-";
export const sandboxNetworkName = (installation: string) => `${NETWORK_PREFIX}${installation}`;
export const internalNetworkName = (installation: string) => `${NETWORK_PREFIX}${installation}-internal`;
const networkName = (installation: string, egress: SandboxEgress) =>
  egress === "proxy" ? internalNetworkName(installation) : sandboxNetworkName(installation);

/** The layout for an API on the host: one shared bridge, each container reached at its own address. */
export function sharedNetworking(options: {
  docker: Docker;
  /** Awaited each time a network is found or made, before a sandbox joins it: the API listens on its host
   * address (which may change when the network is made again after a prune). */
  onNetwork?: (network: SandboxNetwork) => Promise<void>;
  /** Closes the host's ports (limitHost); default the host's iptables. */
  firewall?: HostFirewall;
}): SandboxNetworking {
  const { docker } = options;
  const firewall = options.firewall ?? createHostFirewall({ run: iptables });
  // One lookup or creation per network and process; a failure is forgotten so the next sandbox tries again.
  const networks = new Map<string, Promise<NetworkDescription>>();
  // Installations whose host ports are limited (limitHost succeeded): each network found or made is covered.
  const limited = new Map<string, HostAccess>();

  async function createNetwork(name: string, installation: string, egress: SandboxEgress): Promise<string> {
    // The engine's duplicate check is not atomic: two creates can both succeed, and one may not yet be listed when
    // the other looks. So a creator that sees any copy besides its own removes its own and starts again: the copy
    // committed last always sees the earlier one, so at least one of any two racers yields, and a jittered retry
    // settles the case where both did.
    for (let attempt = 0; attempt < 8; attempt++) {
      const existing = (await networksNamed(docker, name))[0];
      if (existing) return existing;
      let created: string;
      try {
        created = (
          await docker.createNetwork({
            Name: name,
            Driver: "bridge",
            CheckDuplicate: true,
            Internal: egress === "proxy",
            Options: NETWORK_OPTIONS,
            Labels: { [NETWORK_LABEL]: "sandboxes", [OWNER_LABELS.installationId]: installation },
          })
        ).id;
      } catch (err) {
        // 409: another process created it meanwhile.
        if (statusOf(err) !== 409) throw err;
        continue;
      }
      const copies = await networksNamed(docker, name);
      if (copies.length === 1 && copies[0] === created) return created;
      // Another process may already have joined ours (it lists the oldest first): then ours stays, the other yields.
      const inUse = await docker
        .getNetwork(created)
        .remove()
        .then(
          () => false,
          (err: unknown) => statusOf(err) !== 404,
        );
      if (inUse) return created;
      await delay(20 + randomInt(80 * (attempt + 1)));
    }
    throw new Error(`the sandbox network ${name} could not be made: other processes kept racing for it`);
  }

  /** The installation's existing shared networks. */
  async function existing(installation: string): Promise<NetworkDescription[]> {
    const ids = [
      ...(await networksNamed(docker, sandboxNetworkName(installation))).slice(0, 1),
      ...(await networksNamed(docker, internalNetworkName(installation))).slice(0, 1),
    ];
    return Promise.all(ids.map((id) => describeNetwork(docker, id)));
  }

  function ensureNetwork(installation: string, egress: SandboxEgress): Promise<NetworkDescription> {
    const name = networkName(installation, egress);
    let pending = networks.get(name);
    if (!pending) {
      pending = createNetwork(name, installation, egress)
        .then((id) => describeNetwork(docker, id))
        .then(async (network) => {
          // Closed before any sandbox joins: a sandbox must never see the host's other ports, even for a moment.
          if (limited.has(installation)) await firewall.cover(firewallChain(installation), ["-i", network.bridge]);
          await options.onNetwork?.(network);
          return network;
        });
      networks.set(name, pending);
      pending.catch(() => networks.delete(name));
    }
    return pending;
  }

  return {
    async place(owner, egress = "open"): Promise<SandboxPlacement> {
      const network = await ensureNetwork(owner.installationId, egress);
      return {
        networkId: network.id,
        // The host as this network sees it, not the default bridge's gateway: the API listens there even when it
        // listens on loopback only otherwise.
        hostAddress: network.hostAddress,
      };
    },
    forget: (owner) => {
      networks.delete(sandboxNetworkName(owner.installationId));
      networks.delete(internalNetworkName(owner.installationId));
    },
    // The container's own address on the bridge, straight from the host: no port published, so no docker-proxy
    // process in the path (it cost a preview a quarter of its throughput).
    endpoint(addresses, servicePort) {
      const own = Object.entries(addresses.networks).find(([name, ip]) => name.startsWith(NETWORK_PREFIX) && ip);
      return own ? `http://${own[1]}:${servicePort}` : null;
    },
    release: async () => {},
    sharedNetworks: async (installationId) =>
      (await existing(installationId)).map(({ hostAddress, subnet }) => ({ hostAddress, subnet })),
    async limitHost(access) {
      const chain = firewallChain(access.installationId);
      limited.set(access.installationId, access);
      try {
        await firewall.open(chain, access.holder, access.ports);
        for (const network of await existing(access.installationId))
          await firewall.cover(chain, ["-i", network.bridge]);
        return { enforced: true };
      } catch (err) {
        limited.delete(access.installationId);
        await firewall.close(chain, access.holder).catch(() => {});
        return { enforced: false, reason: (err as Error).message };
      }
    },
    async unlimitHost(access) {
      if (!limited.delete(access.installationId)) return;
      await firewall.close(firewallChain(access.installationId), access.holder);
    },
  };
}
