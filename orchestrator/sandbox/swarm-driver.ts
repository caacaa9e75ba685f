import type { Duplex } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import type Docker from "dockerode";
import { z } from "zod";
import { demux, linesOf } from "../../protocol/docker-streams.ts";
import { OrchestratorError } from "../errors.ts";
import { createDockerDriver } from "./docker-driver.ts";
import type { AppContainerSpec, NetworkOwner, SandboxDriver, SandboxNetwork, SandboxSpec } from "./driver.ts";
import { withOrchestratorErrors } from "./engine-errors.ts";
import { statusOf } from "./networking.ts";
import { APP_LABELS, OWNER_LABELS } from "./owner-labels.ts";
import { createSwarmImages } from "./swarm-images.ts";
import { createOwnNetwork, nodeNetworks, releaseOwnNetwork } from "./swarm-network.ts";
import { createSwarmRelay, hostPortsOf } from "./swarm-relay.ts";
import { currentTask, ENDED, type SwarmService, serviceSpec, toInfo } from "./swarm-services.ts";
import { type SwarmNode, spreadConstraints } from "./swarm-spread.ts";
import { createSwarmTasks } from "./swarm-tasks.ts";

/** The stack's Swarm settings (SVC_REGISTRY, SVC_SWARM_CONSTRAINTS, SVC_SWARM_PREFERENCES), as the API passes them. */
export const SwarmSettings = z.object({
  /** `host:port` of a registry every node pulls from; none: every node must hold the images already. */
  registry: z.string().min(1).optional(),
  /** Placement constraints of every sandbox service (`node.labels.svc-sandboxes==true`). */
  constraints: z.array(z.string().min(1)).default([]),
  /** Node attributes sandbox services are spread over (`node.labels.zone`). */
  spread: z.array(z.string().min(1)).default([]),
  /** How long `start` waits for the task to run: a first pull on a node, or a node freeing room, takes a while. */
  startTimeoutMs: z.number().int().positive().default(120_000),
});
export type SwarmSettings = z.input<typeof SwarmSettings>;

const APPS_NOT_ON_SWARM =
  "[[apps]] do not run on the swarm driver yet (SVC_SANDBOX_DRIVER=swarm): their ports need an address the API " +
  "dials, and a Swarm task has none; sessions run";

/** How often a followed log looks whether the task ended (its stream does not end by itself: Swarm keeps it open). */
const FOLLOW_CHECK_MS = 1000;

/** A stream's chunks until it ends, or until it is stopped: the destroyed stream then ends the reading, not fails it. */
async function* untilStopped(stream: AsyncIterable<Buffer>, stopped: () => boolean): AsyncIterable<Buffer> {
  try {
    for await (const chunk of stream) yield chunk;
  } catch (err) {
    if (!stopped()) throw err;
  }
}

/**
 * The sandbox driver on Docker Swarm, through the manager this engine is: each sandbox (and each app deploy) is a
 * service of one task on an overlay network of its own (swarm-services.ts, swarm-network.ts). The API never dials
 * a sandbox here (`endpoint` is null): the daemon dials out to the API. What needs the container itself (exec,
 * disk usage) works for tasks on this node and says so for the others.
 */
export function createSwarmDriver(deps: {
  docker: Docker;
  servicePort: number;
  settings: SwarmSettings;
  /** Awaited for each node network sandboxes meet this host on (nodeNetworks): the API listens on its address. */
  onNetwork?: (network: SandboxNetwork) => Promise<void>;
}): SandboxDriver {
  const { docker } = deps;
  const settings = SwarmSettings.parse(deps.settings);
  // This engine as a plain Docker engine: builds (with their fences) and what needs a task's container here.
  const local = createDockerDriver({ docker, servicePort: deps.servicePort });
  const tasks = createSwarmTasks({ docker });
  const images = createSwarmImages({ docker, build: local.buildImage, registry: settings.registry });
  const announced = new Set<string>();
  const relay = createSwarmRelay({ docker });

  async function announceNetworks(): Promise<void> {
    if (!deps.onNetwork) return;
    for (const network of await nodeNetworks(docker)) {
      const key = `${network.hostAddress} ${network.subnet}`;
      if (announced.has(key)) continue;
      await deps.onNetwork(network);
      announced.add(key);
    }
  }

  async function services(installationId: string): Promise<SwarmService[]> {
    const all = (await docker.listServices({
      filters: { label: [`${OWNER_LABELS.installationId}=${installationId}`] },
    })) as unknown as SwarmService[];
    // Only what this driver made, by its sandbox's or deploy's label (as the Docker driver).
    return all.filter((s) => s.Spec.Labels?.[OWNER_LABELS.sandboxId] || s.Spec.Labels?.[APP_LABELS.deployId]);
  }

  /** The constraints that spread the next service (swarm-spread.ts) over the installation's live services. Two
   * creates at the same moment may pick the same place. */
  async function spreading(installationId: string): Promise<string[]> {
    if (settings.spread.length === 0) return [];
    const [nodes, ours] = await Promise.all([docker.listNodes() as Promise<SwarmNode[]>, services(installationId)]);
    const byService = await tasks.tasksOf(ours.map((s) => s.ID));
    const live = ours.flatMap((s) => {
      const task = currentTask(byService.get(s.ID) ?? []);
      if (ENDED.has(task?.Status?.State ?? "")) return [];
      return [{ nodeId: task?.NodeID, constraints: s.Spec.TaskTemplate?.Placement?.Constraints ?? [] }];
    });
    return spreadConstraints(nodes, live, settings.spread, settings.constraints);
  }

  async function create(spec: SandboxSpec | AppContainerSpec): Promise<string> {
    // An app's port would need an address the API dials, which no Swarm task has, and an open way out would reach
    // its node's every port: refused before anything runs.
    if (!("servicePort" in spec)) throw new OrchestratorError("SANDBOX_BACKEND_FAILED", APPS_NOT_ON_SWARM);
    const owner: NetworkOwner = spec.owner;
    const image = await images.runnable(spec.image);
    await announceNetworks();
    const constraints = [...settings.constraints, ...(await spreading(owner.installationId))];
    const egress = spec.egress ?? "open";
    const networkId = await createOwnNetwork(docker, owner, egress);
    const leave = (network: string) => relay.leave(owner.installationId, network);
    try {
      // Behind an internal network the host is the relay, which answers to the host's name there.
      if (egress === "proxy") await relay.join(owner.installationId, networkId, hostPortsOf(spec.env), image);
      const service = await docker.createService(
        serviceSpec(spec, { networkId, image, constraints, spread: settings.spread, hostIsNode: egress !== "proxy" }),
      );
      return service.id;
    } catch (err) {
      await releaseOwnNetwork(docker, owner.sandboxId, leave).catch(() => {});
      throw err;
    }
  }

  async function existing(id: string): Promise<SwarmService> {
    const service = await tasks.service(id);
    if (!service) throw new OrchestratorError("SANDBOX_BACKEND_FAILED", `the sandbox service ${id} does not exist`);
    return service;
  }

  return withOrchestratorErrors<SandboxDriver>(
    {
      create,

      async start(id) {
        const service = await existing(id);
        const task = await tasks.waitRunning(id, service.Spec.Name, settings.startTimeoutMs);
        await announceNetworks();
        return toInfo(service, task);
      },

      // A service's resources have limits and reservations but no CPU weight: a pooled task boots as any task does.
      async booted() {},

      async remove(id) {
        const service = await tasks.service(id);
        if (!service) return;
        const labels = service.Spec.Labels ?? {};
        const here = await tasks.localContainer(id, "remove").catch(() => undefined);
        try {
          await docker.getService(id).remove();
        } catch (err) {
          if (statusOf(err) !== 404) throw err;
        }
        // Killed at once, as the Docker driver removes a container: its network is free without the grace period.
        // (A task on another node is stopped by its own engine.)
        if (here)
          await docker
            .getContainer(here)
            .remove({ force: true })
            .catch(() => {});
        const installationId = labels[OWNER_LABELS.installationId];
        await releaseOwnNetwork(
          docker,
          labels[OWNER_LABELS.sandboxId] ?? labels[APP_LABELS.deployId],
          async (network) => {
            if (installationId) await relay.leave(installationId, network);
          },
        );
      },

      async inspect(id) {
        const service = await tasks.service(id);
        return service && toInfo(service, await tasks.taskOf(id));
      },

      async list(installationId) {
        const ours = await services(installationId);
        const byService = await tasks.tasksOf(ours.map((s) => s.ID));
        return ours.map((s) => toInfo(s, currentTask(byService.get(s.ID) ?? [])));
      },

      // The task containers of this node carry the owner's labels: the Docker driver's measure counts them.
      diskUsage: (installationId) => local.diskUsage(installationId),

      async logs(id, options) {
        const service = docker.getService(id);
        const wanted = { stdout: true, stderr: true, tail: options.tail };
        if (!options.follow) {
          const all = (await service.logs({ ...wanted, follow: false })) as unknown as Buffer;
          return linesOf(demux([all]));
        }
        const stream = (await service.logs({ ...wanted, follow: true })) as NodeJS.ReadableStream & Duplex;
        let stopped = false;
        const stop = () => {
          stopped = true;
          stream.destroy();
        };
        options.signal.addEventListener("abort", stop, { once: true });
        // A followed service log stays open after its task ended (Swarm waits for another task): end it as the
        // Docker driver's ends with its container, a moment after, so the last lines still arrive.
        void (async () => {
          while (!options.signal.aborted && !stream.destroyed) {
            await delay(FOLLOW_CHECK_MS);
            // Ended: its task did, or the service is gone. An engine that did not answer this once is asked again.
            const ended = await tasks.taskOf(id).then(
              async (task) => (task ? ENDED.has(task.Status?.State ?? "") : !(await tasks.service(id))),
              () => false,
            );
            if (ended) {
              await delay(FOLLOW_CHECK_MS);
              return stop();
            }
          }
        })();
        return linesOf(demux(untilStopped(stream, () => stopped)));
      },

      exec: async (id, spec) => local.exec(await tasks.localContainer(id, "exec"), spec),

      // The service's spec holds the environment its task was created with, wherever the task runs.
      async environment(id) {
        const env = (await existing(id)).Spec.TaskTemplate?.ContainerSpec?.Env ?? [];
        return Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
      },

      imageExists: (tag) => images.imageExists(tag),
      buildImage: (build, onStep) => images.buildImage(build, onStep),

      // Not the installation's own networks (overlay networks have no host side): this node's docker_gwbridge,
      // through which its tasks reach the host (swarm-network.ts).
      networks: () => nodeNetworks(docker),
      // Sandboxes are fenced by their internal networks whatever this host's firewall says; image builds run on this
      // engine as the Docker driver's do, behind its firewall.
      limitHost: (access) => local.limitHost(access),
      unlimitHost: (access) => local.unlimitHost(access),
      unlistedEgress: async () => "proxy",
    },
    "the swarm",
  );
}
