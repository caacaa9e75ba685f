import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { packageRoot } from "../../../protocol/package-root.ts";
import { CliError } from "../../errors.ts";
import { dockerGet } from "./docker-engine.ts";
import { runToEnd, runWithFiles } from "./run-to-end.ts";
import type { SelfHostPaths } from "./state.ts";

/** The stack's services, in the order they start. */
export const COMPOSE_SERVICES = ["postgres", "api", "edge"] as const;
export type ComposeService = (typeof COMPOSE_SERVICES)[number];

/**
 * Whether an executable of this name is on PATH. Debian's docker-compose is Python: running its `version` to find
 * it cost every compose-mode command half a second; one that is there but broken fails its first real command.
 */
function onPath(name: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((dir) => {
    try {
      accessSync(join(dir || ".", name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** How to run compose here: the v2 plugin when the engine's CLI has it, else Debian's docker-compose (v1.29). */
let detected: string[] | undefined;
export function composeCommand(): string[] {
  if (detected) return detected;
  if (spawnSync("docker", ["compose", "version"], { stdio: "ignore" }).status === 0) detected = ["docker", "compose"];
  else if (onPath("docker-compose")) detected = ["docker-compose"];
  else {
    throw new CliError(
      "compose mode needs Docker Compose: neither 'docker compose' nor 'docker-compose' runs here " +
        "(scripts/setup.sh docker installs it)",
    );
  }
  return detected;
}

/** One compose project per stack home: the default home is `svc`, any other gets its own name (tests, users). */
export function composeProject(paths: SelfHostPaths): string {
  if (resolve(paths.home) === resolve(homedir(), ".svc")) return "svc";
  return `svc-${createHash("sha256").update(resolve(paths.home)).digest("hex").slice(0, 8)}`;
}

/** The compose file and the generated settings beside the home's other files. */
export function composeFiles(paths: SelfHostPaths): string[] {
  const root = packageRoot();
  return [join(root, "compose", "compose.yaml"), join(paths.home, "compose", "settings.json")];
}

export type ComposeRun = { project: string; files: string[]; env: Record<string, string> };

const args = (run: ComposeRun, rest: string[]) => [
  ...composeCommand().slice(1),
  "-p",
  run.project,
  ...run.files.flatMap((f) => ["-f", f]),
  ...rest,
];

/** Runs a compose command to its end; its output is returned (and, with `onLine`, seen line by line). */
export function compose(
  run: ComposeRun,
  rest: string[],
  onLine?: (line: string) => void,
): Promise<{ code: number; output: string }> {
  return runToEnd(composeCommand()[0]!, args(run, rest), {
    env: run.env,
    onLine,
    missing: "compose mode needs docker compose (or docker-compose): run scripts/setup.sh",
  });
}

/** A compose command with a file as its stdin and another as its stdout (runWithFiles): a database dump in or out. */
export const composeWithFiles = (run: ComposeRun, rest: string[], files: { input?: string; output?: string }) =>
  runWithFiles(composeCommand()[0]!, args(run, rest), run.env, files);

export type ServiceContainer = {
  service: string;
  name: string;
  state: string;
  /** healthy, unhealthy, starting, or none when the service has no health check. */
  health: "healthy" | "unhealthy" | "starting" | "none";
  status: string;
};

/** The project's containers as the engine lists them (labels are the same under compose v1 and v2). */
export async function serviceContainers(project: string): Promise<ServiceContainer[]> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`com.docker.compose.project=${project}`] }));
  const res = await dockerGet(`/containers/json?all=1&filters=${filters}`);
  if ("error" in res) throw new CliError(`the Docker engine did not answer: ${res.error}`);
  if (res.status !== 200) throw new CliError(`the Docker engine refused to list containers (HTTP ${res.status})`);
  const list = JSON.parse(res.body) as {
    Names: string[];
    State: string;
    Status: string;
    Labels: Record<string, string>;
  }[];
  return list
    .map((c) => ({
      service: c.Labels["com.docker.compose.service"] ?? "?",
      name: (c.Names[0] ?? "").replace(/^\//, ""),
      state: c.State,
      health: /\(healthy\)/.test(c.Status)
        ? ("healthy" as const)
        : /\(unhealthy\)/.test(c.Status)
          ? ("unhealthy" as const)
          : /health: starting/.test(c.Status)
            ? ("starting" as const)
            : ("none" as const),
      status: c.Status,
    }))
    .sort(
      (a, b) =>
        COMPOSE_SERVICES.indexOf(a.service as ComposeService) - COMPOSE_SERVICES.indexOf(b.service as ComposeService) ||
        a.name.localeCompare(b.name),
    );
}

/** Whether any container of this stack's compose project runs (false when no engine answers). */
export async function composeRunning(paths: SelfHostPaths): Promise<boolean> {
  try {
    return (await serviceContainers(composeProject(paths))).some((c) => c.state === "running");
  } catch {
    return false;
  }
}
