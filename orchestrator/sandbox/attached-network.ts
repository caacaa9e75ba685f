import { randomInt } from "node:crypto";
import type Docker from "dockerode";
import {
  describeNetwork,
  NETWORK_LABEL,
  networksNamed,
  type SandboxNetworking,
  statusOf,
  toAddress,
} from "./networking.ts";
import { APP_LABELS, OWNER_LABELS } from "./owner-labels.ts";

/** Each sandbox's network is a /28: its gateway, the sandbox and up to a dozen API replicas. */
const BLOCK_BITS = 28;
/** A network left with no sandbox in it (its container removed behind our back) is swept after this long. */
const ABANDONED_AFTER_MS = 2 * 60_000;
const COMPOSE_PROJECT = "com.docker.compose.project";
const COMPOSE_SERVICE = "com.docker.compose.service";

const NETWORK_PREFIX = "svc-sandbox-";
export const sandboxOwnNetworkName = (sandboxId: string) => `${NETWORK_PREFIX}${sandboxId}`;

function parsePool(cidr: string): { base: number; blocks: number } {
  const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
  const bits = Number(match?.[5]);
  if (!match || bits > BLOCK_BITS)
    throw new Error(`sandbox subnet pool ${cidr} must be an IPv4 /${BLOCK_BITS} or wider`);
  const base = match.slice(1, 5).reduce((n, octet) => n * 256 + Number(octet), 0);
  return { base: base - (base % 2 ** (32 - bits)), blocks: 2 ** (BLOCK_BITS - bits) };
}

/** Rounds of disconnect and remove before a network that keeps getting endpoints is reported (removeNetwork). */
const REMOVE_NETWORK_ROUNDS = 4;

/**
 * The layout for an API that runs in a container (compose mode): every sandbox gets a bridge of its own, carved as a
 * /28 from `subnetPool` (so the engine's ~30 default pools are never exhausted), and every API container of the
 * stack joins it under the alias `apiAlias`. A sandbox therefore sees the API and the internet; the API reaches its
 * daemon on its own address, with no port published on the host; and no two sandboxes share a network. A sandbox
 * whose egress goes through the API's proxy gets an internal network (no route out; the API containers on it).
 * The host's own ports answer on the network's gateway: this API, in a container, can neither change nor see the
 * host's firewall, so `svc self-host start` closes them from the host (matching the pool's source addresses).
 */
export function attachedNetworking(options: {
  docker: Docker;
  /** This API's own container (its id or name). */
  self: string;
  subnetPool: string;
  apiAlias: string;
}): SandboxNetworking & { adopt(installationId: string): Promise<number> } {
  const { docker } = options;
  const pool = parsePool(options.subnetPool);

  // This container's id and compose labels do not change while it runs: looked up once.
  let selfInfo: Promise<{ id: string; labels: Record<string, string> }> | undefined;
  const self = () => {
    selfInfo ??= docker
      .getContainer(options.self)
      .inspect()
      .then((c) => ({ id: c.Id, labels: c.Config.Labels ?? {} }));
    selfInfo.catch(() => {
      selfInfo = undefined;
    });
    return selfInfo;
  };

  /** This API's container and its replicas: the compose service's running containers. */
  async function apiContainers(): Promise<string[]> {
    const { id, labels } = await self();
    const project = labels[COMPOSE_PROJECT];
    const service = labels[COMPOSE_SERVICE];
    if (!project || !service) return [id];
    const peers = await docker.listContainers({
      filters: { label: [`${COMPOSE_PROJECT}=${project}`, `${COMPOSE_SERVICE}=${service}`], status: ["running"] },
    });
    return [...new Set([id, ...peers.map((p) => p.Id)])];
  }

  async function join(networkId: string, container: string): Promise<void> {
    try {
      await docker
        .getNetwork(networkId)
        .connect({ Container: container, EndpointConfig: { Aliases: [options.apiAlias] } });
    } catch (err) {
      // Already there (403 on this engine, 409 on others).
      if (!/already exists|already attached/i.test((err as Error).message)) throw err;
    }
  }

  async function createNetwork(name: string, labels: Record<string, string>, internal: boolean): Promise<string> {
    const start = randomInt(pool.blocks);
    for (let attempt = 0; attempt < Math.min(pool.blocks, 64); attempt++) {
      const block = pool.base + ((start + attempt) % pool.blocks) * 2 ** (32 - BLOCK_BITS);
      const subnet = `${toAddress(block)}/${BLOCK_BITS}`;
      try {
        return (
          await docker.createNetwork({
            Name: name,
            Driver: "bridge",
            CheckDuplicate: true,
            Internal: internal,
            Labels: labels,
            // The gateway named, or the engine leaves it out of the network's description.
            IPAM: { Config: [{ Subnet: subnet, Gateway: toAddress(block + 1) }] },
          })
        ).id;
      } catch (err) {
        // Taken by another network (ours or anyone's): try the next block.
        if (!/overlap/i.test((err as Error).message)) throw err;
      }
    }
    throw new Error(`no free /${BLOCK_BITS} left in the sandbox subnet pool ${options.subnetPool}`);
  }

  /**
   * Disconnects what is on the network and removes it. Another API replica joins every sandbox network it finds (at
   * its start, below), so one may join between the disconnects and the removal, which the engine then refuses (403,
   * "has active endpoints"): a few rounds settle that race.
   */
  async function removeNetwork(id: string): Promise<void> {
    const network = docker.getNetwork(id);
    for (let round = 1; ; round++) {
      const info = await network.inspect().catch(() => undefined);
      if (!info) return;
      for (const container of Object.keys(info.Containers ?? {})) {
        await network.disconnect({ Container: container, Force: true }).catch(() => {});
      }
      const refused = await network.remove().then(
        () => undefined,
        (err: unknown) => (statusOf(err) === 404 ? undefined : err),
      );
      if (!refused) return;
      if (statusOf(refused) !== 403 || round === REMOVE_NETWORK_ROUNDS) throw refused;
      await new Promise((r) => setTimeout(r, 100 * round));
    }
  }

  return {
    async place(owner, egress = "open") {
      const name = sandboxOwnNetworkName(owner.sandboxId);
      const internal = egress === "proxy";
      let id = (await networksNamed(docker, name))[0];
      // The sandbox's image build made it open (builds are not proxied): a proxied sandbox needs it internal.
      if (id && (await describeNetwork(docker, id)).internal !== internal) {
        await removeNetwork(id);
        id = undefined;
      }
      id ??= await createNetwork(
        name,
        {
          [NETWORK_LABEL]: "sandbox",
          [OWNER_LABELS.installationId]: owner.installationId,
          [OWNER_LABELS.sandboxId]: owner.sandboxId,
        },
        internal,
      );
      for (const container of await apiContainers()) await join(id, container);
      return { networkId: id, hostAddress: (await describeNetwork(docker, id)).hostAddress };
    },
    forget: () => {},
    endpoint(addresses, servicePort) {
      const own = Object.entries(addresses.networks).find(([name, ip]) => name.startsWith(NETWORK_PREFIX) && ip);
      return own ? `http://${own[1]}:${servicePort}` : null;
    },
    async release(sandboxId) {
      if (!sandboxId) return;
      for (const id of await networksNamed(docker, sandboxOwnNetworkName(sandboxId))) await removeNetwork(id);
    },
    sharedNetworks: async () => [],
    limitHost: async () => undefined,
    unlimitHost: async () => {},

    /**
     * At start: this container joins every sandbox network of the installation (a replica started later, or an API
     * container re-created by an upgrade, reaches the sandboxes that kept running), and networks whose sandbox is
     * gone are removed. Returns how many it joined.
     */
    async adopt(installationId) {
      const networks = await docker.listNetworks({
        filters: { label: [`${NETWORK_LABEL}=sandbox`, `${OWNER_LABELS.installationId}=${installationId}`] },
      });
      const { id } = await self();
      const sandboxes = await docker.listContainers({
        all: true,
        filters: { label: [`${OWNER_LABELS.installationId}=${installationId}`] },
      });
      // An app deploy's container owns its network as a sandbox does (keyed by the deploy's id).
      const withSandbox = new Set(
        sandboxes.flatMap((c) => [c.Labels[OWNER_LABELS.sandboxId], c.Labels[APP_LABELS.deployId]]),
      );
      let joined = 0;
      for (const summary of networks) {
        const sandboxId = summary.Labels?.[OWNER_LABELS.sandboxId];
        if (!withSandbox.has(sandboxId) && Date.now() - Date.parse(summary.Created) > ABANDONED_AFTER_MS) {
          await removeNetwork(summary.Id);
          continue;
        }
        await join(summary.Id, id);
        joined += 1;
      }
      return joined;
    },
  };
}
