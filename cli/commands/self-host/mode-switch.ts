import { existsSync } from "node:fs";
import { join } from "node:path";
import { readCliEnv } from "../../config.ts";
import { readConfig } from "../../config-file.ts";
import { findLink } from "../../link-file.ts";
import { info, warn } from "../../output.ts";
import { composeProject } from "./compose.ts";
import { dockerGet } from "./docker-engine.ts";
import {
  EngineUnavailable,
  installationContainers,
  installationIds,
  removeInstallations,
} from "./installation-objects.ts";
import { readState, type SelfHostPaths, StackMode, selfHostPaths } from "./state.ts";
import { removeInstallationServices, swarmVolumes } from "./swarm.ts";

const SESSION_LABEL = "dev.svc.session";

/** The modes but this one, in the order a hint names them. */
export const otherModes = (mode: StackMode): StackMode[] => StackMode.options.filter((m) => m !== mode);

/**
 * Before a start in another mode: nothing of the mode left behind keeps running. Sandboxes its stack left running
 * (a plain `stop` keeps them for the next start to adopt) are stopped through that stack, started for the purpose
 * (`stack.start`, then `stack.stop` with the sandboxes), so their sessions are recorded as stopped and their uncommitted work saved; then
 * whatever is left of it (apps, networks) is removed. Its data stays: switching back finds every project.
 */
export async function leaveMode(
  paths: SelfHostPaths,
  left: StackMode,
  stack: { start: () => Promise<unknown>; stop: () => Promise<unknown> },
): Promise<void> {
  const state = readState(paths);
  const ids = state ? installationIds(state, left) : [];
  if (ids.length === 0) return;
  let sandboxes: number;
  try {
    sandboxes = (await installationContainers(ids)).filter(
      (c) => c.Labels?.[SESSION_LABEL] && c.State === "running",
    ).length;
  } catch (err) {
    if (err instanceof EngineUnavailable) return;
    throw err;
  }
  if (sandboxes > 0) {
    info(
      `the ${left} mode's stack left ${sandboxes} session sandbox${sandboxes === 1 ? "" : "es"} running: ` +
        `starting it to stop ${sandboxes === 1 ? "it" : "them"} first…`,
    );
    try {
      await stack.start();
      await stack.stop();
    } catch (err) {
      warn(
        `the ${left} mode's stack could not stop its sessions (${(err as Error).message.split("\n")[0]}): ` +
          "their sandboxes are removed; it shows those sessions as stopped at its next start",
      );
    }
  }
  // Swarm's sandboxes and apps are services: removed as such, or Swarm would keep their dead tasks' records.
  const services = left === "swarm" ? await removeInstallationServices(ids) : [];
  const removed = await removeInstallations(ids, { images: false });
  const what = [
    ...services.map((s) => `service ${s}`),
    ...removed.containers.map((c) => `container ${c}`),
    ...removed.networks.map((n) => `network ${n}`),
  ];
  if (what.length > 0) info(`removed what the ${left} mode's stack left on the engine: ${what.join(", ")}`);
}

/** Whether a mode's data exists: the embedded database under the home, the compose or swarm stack's database volume. */
async function modeHasData(paths: SelfHostPaths, mode: StackMode): Promise<boolean> {
  if (mode === "embedded") return existsSync(join(paths.home, "data", "pglite"));
  const project = composeProject(paths);
  const volume = mode === "compose" ? `${project}_pgdata` : swarmVolumes(project).pgdata;
  const res = await dockerGet(`/volumes/${encodeURIComponent(volume)}`, 1500);
  return "status" in res && res.status === 200;
}

/**
 * A hint for a project the self-hosted stack does not know (404 PROJECT_NOT_FOUND) while the other mode's data
 * exists: each mode keeps its own projects. Empty unless the command went to this machine's stack (host
 * `selfhost`, as `--host`, the link file or the active host name it, and no SVC_API_URL).
 */
export async function projectElsewhereHint(hostFlag: string | undefined): Promise<string> {
  try {
    const env = readCliEnv();
    if (env.apiUrl) return "";
    const host = hostFlag ?? findLink()?.link.host ?? readConfig().active_host;
    if (host !== "selfhost") return "";
    const paths = selfHostPaths(env);
    const state = readState(paths);
    if (!state) return "";
    for (const other of otherModes(state.mode)) {
      if (await modeHasData(paths, other))
        return `; this project may live in the ${other} mode's data: svc self-host restart --mode ${other}`;
    }
    return "";
  } catch {
    return "";
  }
}
