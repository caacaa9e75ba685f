import { MODEL_SETUP_COMMAND } from "../../../protocol/env.ts";
import { VERSION } from "../../../protocol/version.ts";
import { createApiClient } from "../../api-client.ts";
import { printJson, printLine } from "../../output.ts";
import { composeProject, type ServiceContainer, serviceContainers } from "./compose.ts";
import { readHealth } from "./health.ts";
import { readPid } from "./process.ts";
import { runningMode } from "./running-mode.ts";
import { allSessions } from "./stack-sessions.ts";
import { configuredModel, ensureState, localOrigin, type StackMode, selfHostPaths } from "./state.ts";
import { type StackService, stackServices, swarmVolumes } from "./swarm.ts";

export type StackStatus = {
  status: "running" | "stopped" | "not answering";
  mode: StackMode;
  url: string;
  listen: string;
  version: string;
  api_version: string | null;
  database: string | null;
  data_dir: string;
  pid: number | null;
  model_configured: boolean;
  model: string | null;
  sessions_running: number | null;
  /** compose mode: the compose project (`docker compose -p <it>`) and each container with its state and health. */
  compose_project: string | null;
  services: ServiceContainer[] | null;
  /** swarm mode only: the stack (`docker stack ps <it>`) and each service with its running and desired tasks. */
  swarm_stack?: string;
  swarm_services?: StackService[];
};

/** Running sessions of every project the admin sees. */
async function runningSessions(origin: string, token: string): Promise<number> {
  const sessions = await allSessions(createApiClient({ baseUrl: origin, token }));
  return sessions.filter(({ session }) => session.status === "running").length;
}

export async function stackStatus(): Promise<StackStatus> {
  const paths = selfHostPaths();
  const state = ensureState(paths);
  const origin = localOrigin(state);
  const running = await runningMode(paths);
  const pid = running === "embedded" ? readPid(paths) : undefined;
  const answer = running ? await readHealth(origin, 2000) : undefined;
  const model = configuredModel(state);
  const swarm = running ? running === "swarm" : state.mode === "swarm";
  const compose = !swarm && (state.mode === "compose" || running === "compose");
  const project = composeProject(paths);
  return {
    status: !running ? "stopped" : answer ? "running" : "not answering",
    mode: running ?? state.mode,
    url: origin,
    // Swarm binds no single address: the edge's port is open on every address of its node.
    listen: swarm ? "0.0.0.0" : state.listen,
    version: VERSION,
    api_version: answer?.version ?? null,
    database: answer?.database ?? (compose || swarm || state.env.DATABASE_URL ? "postgres" : "pglite"),
    data_dir: swarm
      ? `docker volumes ${swarmVolumes(project).pgdata}, ${swarmVolumes(project).data}`
      : compose
        ? `docker volumes ${project}_pgdata, ${project}_data`
        : paths.home,
    pid: pid ?? null,
    model_configured: model !== undefined,
    model: model ? `${model.model} at ${model.baseUrl}` : null,
    sessions_running: answer ? await runningSessions(origin, state.admin_token) : null,
    compose_project: compose ? project : null,
    services: compose ? await serviceContainers(project).catch(() => []) : null,
    ...(swarm ? { swarm_stack: project, swarm_services: await stackServices(project).catch(() => []) } : {}),
  };
}

function modeDetail(s: StackStatus): string {
  if (s.mode === "compose") return "containers: PostgreSQL, API and edge";
  if (s.mode === "swarm") return `Swarm stack ${s.swarm_stack}: PostgreSQL, API and edge`;
  return s.database === "postgres" ? "PostgreSQL from DATABASE_URL" : "PGlite in the data dir";
}

export async function printStatus(options: { json?: boolean }): Promise<void> {
  const s = await stackStatus();
  if (options.json) {
    printJson(s);
    return;
  }
  const rows: [string, string][] = [
    [
      "status",
      s.status === "stopped"
        ? `stopped; start it with 'svc self-host start'`
        : s.pid
          ? `${s.status} (pid ${s.pid})`
          : s.status,
    ],
    ["mode", `${s.mode} (${modeDetail(s)})`],
    ["url", s.url],
    ["listen", s.listen],
    ["version", s.api_version && s.api_version !== s.version ? `${s.version} (API ${s.api_version})` : s.version],
    ["data dir", s.data_dir],
    ["model", s.model_configured ? `yes: ${s.model}` : `no: ${MODEL_SETUP_COMMAND}`],
    ["sessions", s.sessions_running === null ? `unknown: the stack is ${s.status}` : `${s.sessions_running} running`],
  ];
  for (const c of s.services ?? []) {
    rows.push([c.service, `${c.state}${c.health === "none" ? "" : ` (${c.health})`}: ${c.name}`]);
  }
  for (const c of s.swarm_services ?? []) rows.push([c.service, `${c.replicas} running: ${c.name}`]);
  for (const [k, v] of rows) printLine(`${`${k}:`.padEnd(10)}${v}`);
}
