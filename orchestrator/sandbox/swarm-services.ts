import type Docker from "dockerode";
import type { ContainerInfo, SandboxLimits, SandboxSpec } from "./driver.ts";
import { APP_LABELS, POOL_LABEL, toAppOwner, toLabels, toOwner } from "./owner-labels.ts";

/** The port the API reaches a container on, recorded at its creation (the Docker driver's label of the same name). */
export const PORT_LABEL = "dev.svc.port";

// The Docker driver's set: enough for git, package managers and dev servers; nothing that reaches the host.
// Swarm's ContainerSpec takes capability lists since API 1.41 (Docker 20.10); `no-new-privileges` only since API
// 1.44 (Docker 25), so a 20.10 engine cannot set it on a task: that one hardening is missing on this driver.
const CAPABILITIES = [
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_FOWNER",
  "CAP_SETUID",
  "CAP_SETGID",
  "CAP_KILL",
  "CAP_NET_BIND_SERVICE",
];

/** At most 3 files of 10 MB of a task's output on its node's disk, as the Docker driver's containers. */
const LOG_DRIVER = { Name: "json-file", Options: { "max-size": "10m", "max-file": "3" } };

/** A sandbox is removed as the Docker driver removes a container (killed): no 10 s wait for a PID 1 that ignores TERM. */
const STOP_GRACE_NS = 1_000_000_000;

/** Where and how a service's task runs, decided by the driver before the spec is written. */
export type ServicePlacement = {
  /** The sandbox's own overlay network. */
  networkId: string;
  /** The image as every node can pull it (the registry's name when one is set). */
  image: string;
  constraints: string[];
  /** Node attributes the scheduler spreads tasks over (`node.labels.zone`). */
  spread: string[];
  /** Whether host.docker.internal is the node's host (false: the relay answers to it, swarm-relay.ts). */
  hostIsNode: boolean;
};

/** The Docker driver's limits in Swarm's terms; `Pids` is honoured by Docker 20.10 (API 1.41) and later. */
const limitsOf = (limits: SandboxLimits): Docker.ResourceRequirements => ({
  Limits: { MemoryBytes: limits.memoryBytes, NanoCPUs: limits.nanoCpus, Pids: limits.pids },
});

/**
 * A one-task service: replicated with one replica that is never restarted (a sandbox that dies stays dead, so the
 * reconciler sees it and frees the session's slot), no published port (sandboxes are reached over their daemon's
 * own link), the owner's labels on the service and on its task's container alike.
 */
export function serviceSpec(spec: SandboxSpec, placement: ServicePlacement): Docker.ServiceSpec {
  const labels = {
    ...toLabels(spec.owner),
    ...(spec.pool ? { [POOL_LABEL]: spec.pool } : {}),
    [PORT_LABEL]: String(spec.servicePort),
  };
  return {
    Name: spec.name,
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: placement.image,
        Labels: labels,
        Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
        // host-gateway is the node's own docker0 address: the host the task runs on, as host.docker.internal is
        // for the Docker driver's containers. Swarm writes `IP name`. (Behind an internal network the name is the
        // relay's, resolved by the engine's DNS: swarm-relay.ts.)
        Hosts: placement.hostIsNode ? ["host-gateway host.docker.internal"] : [],
        CapabilityDrop: ["ALL"],
        CapabilityAdd: CAPABILITIES,
        Init: false,
        StopGracePeriod: STOP_GRACE_NS,
      },
      Resources: limitsOf(spec.limits),
      RestartPolicy: { Condition: "none", MaxAttempts: 0 },
      Placement: {
        Constraints: placement.constraints,
        Preferences: placement.spread.map((descriptor) => ({ Spread: { SpreadDescriptor: descriptor } })),
      },
      Networks: [{ Target: placement.networkId }],
      LogDriver: LOG_DRIVER,
    },
    Mode: { Replicated: { Replicas: 1 } },
    EndpointSpec: { Mode: "vip", Ports: [] },
  };
}

/** A task as the engine lists it: the fields the driver reads. */
export type SwarmTask = {
  ID: string;
  ServiceID: string;
  NodeID?: string;
  DesiredState?: string;
  CreatedAt?: string;
  Version?: { Index?: number };
  Status?: {
    State?: string;
    Message?: string;
    Err?: string;
    ContainerStatus?: { ContainerID?: string; ExitCode?: number };
  };
};

/** A service as the engine lists it: the fields the driver reads. */
export type SwarmService = {
  ID: string;
  Spec: {
    Name: string;
    Labels?: Record<string, string>;
    TaskTemplate?: { ContainerSpec?: { Env?: string[] }; Placement?: { Constraints?: string[] } };
  };
};

/** States a task never leaves: with no restart policy, its service will not run again. */
export const ENDED = new Set(["complete", "shutdown", "failed", "rejected", "orphaned", "remove"]);

/** The service's current task: the newest (one replica, never restarted, so there is one unless it was updated). */
export function currentTask(tasks: SwarmTask[]): SwarmTask | undefined {
  return [...tasks].sort(
    (a, b) => (b.Version?.Index ?? 0) - (a.Version?.Index ?? 0) || (b.CreatedAt ?? "").localeCompare(a.CreatedAt ?? ""),
  )[0];
}

export const isRunning = (task: SwarmTask | undefined) =>
  task?.Status?.State === "running" && task.DesiredState === "running";

/** What the engine says of a task that is not running: its error, else its state and message. */
export function taskStatus(task: SwarmTask | undefined): string {
  if (!task) return "no task was scheduled";
  const { State = "unknown", Message, Err } = task.Status ?? {};
  return Err ? `${State}: ${Err}` : `${State}${Message ? ` (${Message})` : ""}`;
}

/**
 * The orchestrator's view of a service. `endpoint` is always null: on Swarm the API never dials a sandbox; its
 * daemon dials out to the API and everything travels over that link.
 */
export function toInfo(service: SwarmService, task: SwarmTask | undefined): ContainerInfo {
  const labels = service.Spec.Labels;
  const running = isRunning(task);
  if (labels?.[APP_LABELS.deployId])
    return { kind: "app", id: service.ID, running, owner: toAppOwner(labels), endpoint: null };
  return {
    kind: "sandbox",
    id: service.ID,
    name: service.Spec.Name,
    running,
    owner: toOwner(labels),
    endpoint: null,
    pool: labels?.[POOL_LABEL] ?? null,
  };
}
