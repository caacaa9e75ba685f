import { setTimeout as delay } from "node:timers/promises";
import type Docker from "dockerode";
import type { NetworkOwner, SandboxEgress, SandboxNetwork } from "./driver.ts";
import { ipv4Gateway, NETWORK_LABEL, networksNamed, statusOf } from "./networking.ts";
import { OWNER_LABELS } from "./owner-labels.ts";

/**
 * Networks on Swarm. Each sandbox (or app deploy) gets an overlay network of its own, attachable (so an API
 * container, or the daemon link's relay, can join it later) and labelled with its owner: no other task shares it,
 * so a sandbox reaches no other sandbox. Its way out is the node's `docker_gwbridge` (Swarm's own bridge, NAT, no
 * traffic between its containers), which also brings it to the node's host.
 *
 * There is no host-side bridge per overlay network: the host's firewall cannot tell an installation's tasks apart
 * from any other task's on the same node, and tasks on other nodes never cross this host's firewall at all.
 */
const NETWORK_PREFIX = "svc-swarm-";
const networkName = (sandboxId: string) => `${NETWORK_PREFIX}${sandboxId}`;

/** Swarm's bridge on every node that runs a task with an overlay network: its gateway is the node's host. */
export const GWBRIDGE = "docker_gwbridge";

/** How long a network outlives its service: Swarm refuses to remove it until the task's container is gone. */
const RELEASE_TIMEOUT_MS = 20_000;

/**
 * The sandbox's own overlay network, made for it (a copy left by a failed create is reused). `proxy` egress: an
 * internal one, with no way out at all but the installation's relay (swarm-relay.ts), which the driver joins to it.
 */
export async function createOwnNetwork(docker: Docker, owner: NetworkOwner, egress: SandboxEgress): Promise<string> {
  return attachableOverlay(docker, networkName(owner.sandboxId), {
    internal: egress === "proxy",
    labels: {
      [NETWORK_LABEL]: "swarm-sandbox",
      [OWNER_LABELS.installationId]: owner.installationId,
      [OWNER_LABELS.sandboxId]: owner.sandboxId,
    },
  });
}

/** The attachable overlay network of that name, made when missing (a copy left by a failed create is reused). */
export async function attachableOverlay(
  docker: Docker,
  name: string,
  options: { internal: boolean; labels: Record<string, string> },
): Promise<string> {
  const existing = (await networksNamed(docker, name))[0];
  if (existing) return existing;
  const network = await docker.createNetwork({
    Name: name,
    Driver: "overlay",
    Attachable: true,
    Internal: options.internal,
    CheckDuplicate: true,
    Labels: options.labels,
  });
  return network.id;
}

/**
 * Removes the sandbox's network once its service is gone. The manager refuses while a task still uses it, and this
 * engine lists it until its task's container here has let go of it (up to the stop grace period): so this retries
 * until the network is gone from the listing too.
 */
export async function releaseOwnNetwork(
  docker: Docker,
  sandboxId: string | undefined,
  /** Takes what else joined the network (the relay) off it first. */
  leave: (networkName: string) => Promise<void> = async () => {},
): Promise<void> {
  if (!sandboxId) return;
  const name = networkName(sandboxId);
  await leave(name);
  const deadline = Date.now() + RELEASE_TIMEOUT_MS;
  for (;;) {
    const left = await networksNamed(docker, name);
    if (left.length === 0) return;
    for (const id of left) {
      try {
        await docker.getNetwork(id).remove();
      } catch (err) {
        if (statusOf(err) !== 404 && Date.now() > deadline) throw err;
      }
    }
    if (Date.now() > deadline) throw new Error(`the network ${name} is still in use`);
    await delay(100);
  }
}

/**
 * Where this node's sandboxes meet its host: every task with an overlay network reaches the host through
 * docker_gwbridge, from an address in its subnet, and host.docker.internal is the node's docker0 address
 * (host-gateway). So the API listens on that address for peers of the gwbridge's subnet. The bridge is Swarm's,
 * shared by every task of this node (not only this installation's), and exists once the first task ran here.
 * Sandboxes on other nodes reach the API at SVC_SANDBOX_API_ORIGIN or over their daemon's link, not here.
 */
export async function nodeNetworks(docker: Docker): Promise<SandboxNetwork[]> {
  const inspect = (name: string) =>
    docker
      .getNetwork(name)
      .inspect()
      .catch((err) => {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }) as Promise<Docker.NetworkInspectInfo | undefined>;
  const [gwbridge, bridge] = await Promise.all([inspect(GWBRIDGE), inspect("bridge")]);
  const from = ipv4Gateway(gwbridge);
  const host = ipv4Gateway(bridge);
  return from && host ? [{ hostAddress: host.hostAddress, subnet: from.subnet }] : [];
}
