import { z } from "zod";
import { CliError } from "../../errors.ts";
import { COMPOSE_SERVICES, type ComposeService, composeProject } from "./compose.ts";
import { dockerCall } from "./docker-engine.ts";
import { sleep } from "./health.ts";
import { INSTALLATION_LABEL, RELAY_LABEL } from "./installation-objects.ts";
import { runToEnd } from "./run-to-end.ts";
import type { SelfHostPaths } from "./state.ts";

/** The label `docker stack deploy` puts on a stack's services, networks and volumes. */
export const STACK_LABEL = "com.docker.stack.namespace";
/** The stack's name: compose mode's project name, so one home is one name whichever mode runs it. */
export const stackName = (paths: SelfHostPaths) => composeProject(paths);

/** The volumes swarm mode keeps its data in (compose/stack.yaml), apart from compose mode's `<project>_pgdata`. */
export const swarmVolumes = (stack: string) => ({ pgdata: `${stack}_swarm_pgdata`, data: `${stack}_swarm_data` });

/**
 * Removes the stack's data volumes; the names it removed. Swarm stops a removed stack's task containers a moment
 * after `docker stack rm` returns, so a volume still in use is asked for again, for up to `waitMs`.
 */
export async function removeSwarmVolumes(stack: string, waitMs = 30_000): Promise<string[]> {
  const removed: string[] = [];
  const deadline = Date.now() + waitMs;
  for (const volume of Object.values(swarmVolumes(stack))) {
    for (;;) {
      const { code, output } = await dockerCli(["volume", "rm", volume]).catch(() => ({ code: 1, output: "" }));
      if (code === 0) removed.push(volume);
      if (code === 0 || !/in use/i.test(output) || Date.now() > deadline) break;
      await sleep(250);
    }
  }
  return removed;
}

/** A service as GET /services?status=true lists it: the fields read here. */
const Service = z.object({
  ID: z.string(),
  Spec: z.object({
    Name: z.string(),
    Labels: z.record(z.string(), z.string()).nullish(),
    Mode: z
      .object({ Global: z.object({}).passthrough().optional() })
      .passthrough()
      .optional(),
  }),
  ServiceStatus: z.object({ RunningTasks: z.number(), DesiredTasks: z.number() }).optional(),
});
type Service = z.infer<typeof Service>;

/** A task as GET /tasks lists it. */
export const Task = z.object({
  ID: z.string(),
  Slot: z.number().optional(),
  CreatedAt: z.string().default(""),
  DesiredState: z.string().default(""),
  Status: z.object({ State: z.string().default(""), Err: z.string().optional(), Message: z.string().optional() }),
});
export type Task = z.infer<typeof Task>;

export type StackService = {
  /** postgres, api or edge. */
  service: string;
  /** `<stack>_<service>`, the name `docker service` commands take. */
  name: string;
  mode: "replicated" | "global";
  running: number;
  desired: number;
  /** `running/desired`, as `docker service ls` shows it. */
  replicas: string;
};

async function engine(method: string, path: string, timeoutMs = 30_000): Promise<{ status: number; body: string }> {
  const res = await dockerCall(method, path, undefined, timeoutMs);
  if ("error" in res) throw new CliError(`the Docker engine did not answer: ${res.error}`);
  return res;
}

const filters = (f: Record<string, string[]>) => `filters=${encodeURIComponent(JSON.stringify(f))}`;

/** Services with these labels; none when the engine is in no swarm (it answers 503 then). */
async function services(label: string[]): Promise<Service[]> {
  // Short, as compose's listing: every command asks which mode runs (running-mode.ts), a stuck engine included.
  const res = await engine("GET", `/services?status=true&${filters({ label })}`, 3000);
  if (res.status === 503) return [];
  if (res.status !== 200) throw new CliError(`the Docker engine refused to list services (HTTP ${res.status})`);
  return z.array(Service).parse(JSON.parse(res.body));
}

/** The stack's services in compose mode's order, with their running and desired tasks. */
export async function stackServices(stack: string): Promise<StackService[]> {
  const order = (s: string) => COMPOSE_SERVICES.indexOf(s as ComposeService);
  return (await services([`${STACK_LABEL}=${stack}`]))
    .map((s) => {
      const running = s.ServiceStatus?.RunningTasks ?? 0;
      const desired = s.ServiceStatus?.DesiredTasks ?? 0;
      return {
        service: s.Spec.Name.startsWith(`${stack}_`) ? s.Spec.Name.slice(stack.length + 1) : s.Spec.Name,
        name: s.Spec.Name,
        mode: s.Spec.Mode?.Global ? ("global" as const) : ("replicated" as const),
        running,
        desired,
        replicas: `${running}/${desired}`,
      };
    })
    .sort((a, b) => order(a.service) - order(b.service) || a.name.localeCompare(b.name));
}

/** Whether the home's stack is deployed (false when no engine answers or it is in no swarm): `stop` removes it. */
export async function swarmRunning(paths: SelfHostPaths): Promise<boolean> {
  try {
    return (await stackServices(stackName(paths))).length > 0;
  } catch {
    return false;
  }
}

/** A service's tasks, newest first. */
export async function serviceTasks(service: string): Promise<Task[]> {
  const res = await engine("GET", `/tasks?${filters({ service: [service] })}`);
  if (res.status !== 200) throw new CliError(`the Docker engine refused to list tasks (HTTP ${res.status})`);
  return z
    .array(Task)
    .parse(JSON.parse(res.body))
    .sort((a, b) => b.CreatedAt.localeCompare(a.CreatedAt));
}

/**
 * Removes the services the installations' APIs made (sandboxes and apps: the Swarm driver labels them as the Docker
 * driver labels containers), then their overlay networks once their tasks let go. Returns the services' names.
 */
export async function removeInstallationServices(ids: string[]): Promise<string[]> {
  const removed: string[] = [];
  for (const id of new Set(ids)) {
    for (const s of await services([`${INSTALLATION_LABEL}=${id}`])) {
      const res = await engine("DELETE", `/services/${s.ID}`);
      if (res.status >= 300 && res.status !== 404) throw new CliError(`cannot remove the service ${s.Spec.Name}`);
      removed.push(s.Spec.Name);
    }
  }
  // The relay of sandboxes behind internal networks (orchestrator/sandbox/swarm-relay.ts): a container, not a service.
  for (const id of new Set(ids)) {
    const res = await engine(
      "GET",
      `/containers/json?all=1&${filters({ label: [`${INSTALLATION_LABEL}=${id}`, RELAY_LABEL] })}`,
    );
    for (const c of z.array(z.object({ Id: z.string() })).parse(JSON.parse(res.body)))
      await engine("DELETE", `/containers/${c.Id}?force=1`);
  }
  for (const id of new Set(ids)) await removeNetworks([`${INSTALLATION_LABEL}=${id}`], "overlay");
  return removed;
}

const NETWORKS_GONE_MS = 60_000;

/**
 * Removes the networks with these labels (of one driver, when given) and waits until the engine lists none: Swarm
 * refuses, and this engine keeps listing one, until every task's container on it has stopped. Returns what is left
 * at the deadline.
 */
export async function removeNetworks(label: string[], driver?: string): Promise<string[]> {
  const deadline = Date.now() + NETWORKS_GONE_MS;
  for (;;) {
    const res = await engine("GET", `/networks?${filters({ label, ...(driver ? { driver: [driver] } : {}) })}`);
    const left = z.array(z.object({ Id: z.string(), Name: z.string() })).parse(JSON.parse(res.body));
    if (left.length === 0 || Date.now() > deadline) return left.map((n) => n.Name);
    for (const n of left) await engine("DELETE", `/networks/${n.Id}`);
    await sleep(250);
  }
}

/** Runs the docker CLI to its end (stack deploy, stack rm, service ps, service logs); `onLine` sees each line. */
export function dockerCli(
  args: string[],
  env: Record<string, string | undefined> = process.env,
  onLine?: (line: string) => void,
): Promise<{ code: number; output: string }> {
  return runToEnd("docker", args, { env, onLine, missing: "swarm mode needs the docker CLI" });
}
