import type Docker from "dockerode";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import { NETWORK_LABEL, statusOf } from "./networking.ts";
import { OWNER_LABELS } from "./owner-labels.ts";
import { attachableOverlay } from "./swarm-network.ts";

/**
 * The way out of a Swarm sandbox whose egress goes through the API's proxy. Its overlay network is internal: no
 * docker_gwbridge, no route anywhere. One relay container per installation, on this node (the API's), joins each
 * such network and stands in there for the host: the sandbox's `host.docker.internal` is the relay (an alias on its
 * network), and the relay carries the host ports the sandbox's own settings name (the API's port, a model gateway on
 * the host) to this node's host, from a network of its own that has the usual way out. So all such a sandbox reaches
 * is the API's port (its daemon's link, git, and the egress proxy that checks `[sandbox] egress`) and its model,
 * on whichever node it runs: overlay networks span the swarm.
 */
export const RELAY_LABEL = "dev.svc.relay";
const HOST = "host.docker.internal";
const relayName = (installationId: string) => `svc-relay-${installationId}`;

// Each port: accept, connect to the host's same port, pipe both ways; either side's end or error ends both.
const FORWARDER = `const net = require("net");
const [host, ...ports] = process.argv.slice(1);
for (const port of ports) net.createServer((inside) => {
  const out = net.connect(Number(port), host);
  const end = () => { inside.destroy(); out.destroy(); };
  inside.on("error", end); out.on("error", end); inside.on("close", end); out.on("close", end);
  inside.pipe(out).pipe(inside);
}).listen(Number(port));`;

/** The host ports a sandbox's environment names (URLs on host.docker.internal): what its relay must carry. */
export function hostPortsOf(env: Record<string, string>): number[] {
  const ports = new Set<number>();
  for (const value of Object.values(env)) {
    for (const match of value.matchAll(/\bhttps?:\/\/(?:[^@/\s]*@)?host\.docker\.internal(?::(\d+))?/g)) {
      ports.add(match[1] ? Number(match[1]) : value.startsWith("https") ? 443 : 80);
    }
  }
  return [...ports].sort((a, b) => a - b);
}

type RelayContainer = Docker.ContainerInspectInfo;

export function createSwarmRelay(deps: { docker: Docker }) {
  const { docker } = deps;
  const serially = createKeyedMutex();

  const inspect = (installationId: string) =>
    docker
      .getContainer(relayName(installationId))
      .inspect()
      .catch((err) => {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }) as Promise<RelayContainer | undefined>;

  /** The relay's own network: an attachable overlay with the usual way out (docker_gwbridge), as a sandbox's. */
  const ownNetwork = (installationId: string) =>
    attachableOverlay(docker, relayName(installationId), {
      internal: false,
      labels: { [NETWORK_LABEL]: "swarm-relay", [OWNER_LABELS.installationId]: installationId },
    });

  const portsOf = (relay: RelayContainer) => (relay.Config.Labels?.[RELAY_LABEL] ?? "").split(",").filter(Boolean);

  /** The running relay carrying at least `ports`; one carrying fewer is replaced, keeping the networks it joined. */
  async function ensure(installationId: string, ports: number[], image: string): Promise<RelayContainer> {
    const current = await inspect(installationId);
    const carried = current ? portsOf(current) : [];
    const wanted = [...new Set([...carried.map(Number), ...ports])].sort((a, b) => a - b);
    if (current?.State.Running && wanted.every((p) => carried.includes(String(p)))) return current;
    const joined = Object.keys(current?.NetworkSettings.Networks ?? {}).filter((n) => n !== relayName(installationId));
    if (current) await docker.getContainer(current.Id).remove({ force: true });
    const container = await docker.createContainer({
      name: relayName(installationId),
      Image: image,
      Entrypoint: ["/opt/svc/bin/node"],
      Cmd: ["-e", FORWARDER, HOST, ...wanted.map(String)],
      User: "65534:65534",
      Labels: { [RELAY_LABEL]: wanted.join(","), [OWNER_LABELS.installationId]: installationId },
      HostConfig: {
        NetworkMode: await ownNetwork(installationId),
        ExtraHosts: [`${HOST}:host-gateway`],
        RestartPolicy: { Name: "unless-stopped" },
        CapDrop: ["ALL"],
        CapAdd: wanted.some((p) => p < 1024) ? ["NET_BIND_SERVICE"] : [],
        ReadonlyRootfs: true,
        Memory: 128 * 1024 * 1024,
        PidsLimit: 64,
      },
    });
    await container.start();
    for (const network of joined) await connectAsHost(network, container.id);
    return container.inspect();
  }

  /**
   * On a sandbox's network the relay answers to the host's name (a network alias, resolved by the engine's DNS):
   * a relay replaced to carry more ports gets new addresses, and the sandboxes already there still find it.
   */
  const connectAsHost = (network: string, container: string) =>
    docker.getNetwork(network).connect({ Container: container, EndpointConfig: { Aliases: [HOST] } });

  return {
    /**
     * Joins the installation's relay to a sandbox's internal network as host.docker.internal. The relay is made
     * (from `image`, the sandbox's own: it is on this node and has node), or widened to more ports, on the way.
     */
    join(installationId: string, networkId: string, ports: number[], image: string): Promise<void> {
      return serially(installationId, async () => {
        const relay = await ensure(installationId, ports, image);
        const network = await docker.getNetwork(networkId).inspect();
        if (!relay.NetworkSettings.Networks[network.Name]) await connectAsHost(networkId, relay.Id);
      });
    },

    /** Takes the relay off a sandbox's network, so the network can go. */
    leave(installationId: string, networkName: string): Promise<void> {
      return serially(installationId, async () => {
        const relay = await inspect(installationId);
        if (!relay?.NetworkSettings.Networks[networkName]) return;
        await docker
          .getNetwork(networkName)
          .disconnect({ Container: relay.Id, Force: true })
          .catch((err) => {
            if (statusOf(err) !== 404) throw err;
          });
      });
    },
  };
}

export type SwarmRelay = ReturnType<typeof createSwarmRelay>;
