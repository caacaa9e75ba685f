import { setTimeout as delay } from "node:timers/promises";
import type Docker from "dockerode";
import { OrchestratorError } from "../errors.ts";
import { statusOf } from "./networking.ts";
import { currentTask, ENDED, isRunning, type SwarmService, type SwarmTask, taskStatus } from "./swarm-services.ts";

/** How often a waiting call looks at the task again: the manager updates a task's state about once a second. */
const POLL_MS = 250;

export type SwarmTasks = ReturnType<typeof createSwarmTasks>;

export function createSwarmTasks(deps: { docker: Docker }) {
  const { docker } = deps;
  // This engine's node in the swarm: a task whose NodeID is this one has its container here.
  let nodeId: Promise<string> | undefined;
  const localNode = () => {
    nodeId ??= docker.info().then(
      (info: { Swarm?: { NodeID?: string } }) => info.Swarm?.NodeID ?? "",
      (err) => {
        nodeId = undefined; // asked again next time
        throw err;
      },
    );
    return nodeId;
  };

  /** The service, or undefined once it is gone. */
  async function service(id: string): Promise<SwarmService | undefined> {
    try {
      return (await docker.getService(id).inspect()) as SwarmService;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  /** The services' tasks, by service id: one listing for any number of services. */
  async function tasksOf(serviceIds: string[]): Promise<Map<string, SwarmTask[]>> {
    const byService = new Map<string, SwarmTask[]>(serviceIds.map((id) => [id, []]));
    if (serviceIds.length === 0) return byService;
    const tasks = (await docker.listTasks({ filters: { service: serviceIds } })) as SwarmTask[];
    for (const task of tasks) byService.get(task.ServiceID)?.push(task);
    return byService;
  }

  const taskOf = async (serviceId: string) => currentTask((await tasksOf([serviceId])).get(serviceId) ?? []);

  return {
    service,
    tasksOf,
    taskOf,

    /**
     * Waits until the service's task runs. A task that ended (failed, rejected: a missing image, a command that
     * exits) or one still waiting when the time is up (pending: no node meets its constraints or has room) rejects
     * with what the engine says of it.
     */
    async waitRunning(serviceId: string, name: string, timeoutMs: number): Promise<SwarmTask> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const task = await taskOf(serviceId);
        if (isRunning(task)) return task!;
        if (task?.Status?.State && ENDED.has(task.Status.State))
          throw new OrchestratorError(
            "SANDBOX_BACKEND_FAILED",
            `the sandbox service ${name} did not start: ${taskStatus(task)}`,
          );
        if (Date.now() > deadline)
          throw new OrchestratorError(
            "SANDBOX_BACKEND_FAILED",
            `the sandbox service ${name} did not start within ${Math.round(timeoutMs / 1000)} s: its task is ${taskStatus(task)}`,
          );
        await delay(POLL_MS);
      }
    },

    /**
     * The container of the service's task when it runs on this engine's node. Elsewhere the manager cannot reach
     * it (Swarm has no exec across nodes): what needs the container there goes over the sandbox daemon's link.
     */
    async localContainer(serviceId: string, verb: string): Promise<string> {
      const task = await taskOf(serviceId);
      const container = task?.Status?.ContainerStatus?.ContainerID;
      if (!task || !isRunning(task) || !container)
        throw new OrchestratorError(
          "SANDBOX_BACKEND_FAILED",
          `cannot ${verb}: the sandbox service ${serviceId} has no running task (${taskStatus(task)})`,
        );
      if (task.NodeID !== (await localNode()))
        throw new OrchestratorError(
          "SANDBOX_BACKEND_FAILED",
          `cannot ${verb} here: the sandbox service ${serviceId} runs on another Swarm node (${task.NodeID}); on Swarm ${verb} goes over the sandbox daemon's link to the API`,
        );
      return container;
    },
  };
}
