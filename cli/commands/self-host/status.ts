import { MODEL_SETUP_COMMAND } from "../../../protocol/env.ts";
import { ApiHealth } from "../../../protocol/health.ts";
import { ProjectList } from "../../../protocol/project.ts";
import { SessionList } from "../../../protocol/session.ts";
import { VERSION } from "../../../protocol/version.ts";
import { createApiClient } from "../../api-client.ts";
import { printJson, printLine } from "../../output.ts";
import { isAlive, readPid } from "./process.ts";
import { configuredModel, ensureState, localOrigin, selfHostPaths } from "./state.ts";

export type StackStatus = {
  status: "running" | "stopped" | "not answering";
  mode: "embedded";
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
};

async function health(origin: string): Promise<ApiHealth | undefined> {
  try {
    const res = await fetch(`${origin}/v1/health`, { signal: AbortSignal.timeout(2000) });
    const parsed = ApiHealth.safeParse(await res.json());
    return res.ok && parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Running sessions of every project the admin sees. */
async function runningSessions(origin: string, token: string): Promise<number> {
  const api = createApiClient({ baseUrl: origin, token });
  const { projects } = await api.request("GET", "/v1/projects", ProjectList);
  const lists = await Promise.all(
    projects.map((p) => api.request("GET", `/v1/projects/${p.id}/sessions`, SessionList)),
  );
  return lists.flatMap((l) => l.sessions).filter((s) => s.status === "running").length;
}

export async function stackStatus(): Promise<StackStatus> {
  const paths = selfHostPaths();
  const state = ensureState(paths);
  const origin = localOrigin(state);
  const pid = readPid(paths);
  const alive = pid !== undefined && isAlive(pid);
  const answer = alive ? await health(origin) : undefined;
  const model = configuredModel(state);
  return {
    status: !alive ? "stopped" : answer ? "running" : "not answering",
    mode: "embedded",
    url: origin,
    listen: state.listen,
    version: VERSION,
    api_version: answer?.version ?? null,
    database: answer?.database ?? (state.env.DATABASE_URL ? "postgres" : "pglite"),
    data_dir: paths.home,
    pid: alive ? pid : null,
    model_configured: model !== undefined,
    model: model ? `${model.model} at ${model.baseUrl}` : null,
    sessions_running: answer ? await runningSessions(origin, state.admin_token) : null,
  };
}

export async function printStatus(options: { json?: boolean }): Promise<void> {
  const s = await stackStatus();
  if (options.json) {
    printJson(s);
    return;
  }
  const rows: [string, string][] = [
    ["status", s.pid ? `${s.status} (pid ${s.pid})` : `${s.status}; start it with 'svc self-host start'`],
    ["mode", `${s.mode} (${s.database === "postgres" ? "PostgreSQL from DATABASE_URL" : "PGlite in the data dir"})`],
    ["url", s.url],
    ["listen", s.listen],
    ["version", s.api_version && s.api_version !== s.version ? `${s.version} (API ${s.api_version})` : s.version],
    ["data dir", s.data_dir],
    ["model", s.model_configured ? `yes: ${s.model}` : `no: ${MODEL_SETUP_COMMAND}`],
    ["sessions", s.sessions_running === null ? `unknown: the stack is ${s.status}` : `${s.sessions_running} running`],
  ];
  for (const [k, v] of rows) printLine(`${`${k}:`.padEnd(10)}${v}`);
}
