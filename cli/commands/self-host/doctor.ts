import { MODEL_SETUP_COMMAND, PROJECT_MODEL_COMMAND } from "../../../protocol/env.ts";
import type { ApiHealth } from "../../../protocol/health.ts";
import { LOCAL_BASE_IMAGE, PUBLIC_BASE_IMAGE } from "../../../protocol/stack-settings.ts";
import { CliError } from "../../errors.ts";
import { printJson, printLine } from "../../output.ts";
import { composeProject } from "./compose.ts";
import { dockerGet } from "./docker-engine.ts";
import { type Check, checkGateway, checkGatewayFromSandboxes } from "./gateway-checks.ts";
import { readHealth } from "./health.ts";
import { hostFirewallState } from "./host-firewall.ts";
import { configuredModel, ensureState, localOrigin, selfHostPaths } from "./state.ts";
import { requireSwarmManager } from "./swarm-manager.ts";

async function checkStack(origin: string, health: ApiHealth | undefined): Promise<Check> {
  const ok = health !== undefined;
  return {
    check: "stack",
    ok,
    detail: ok ? `the stack answers at ${origin}` : `the stack does not answer at ${origin}: run 'svc self-host start'`,
  };
}

/** The firewall installed at start: sandboxes reach the API's port and the gateway's of this machine, no other. */
function checkHostFirewall(firewall: ApiHealth["host_firewall"]): Check | undefined {
  if (!firewall) return undefined;
  const check = "host-firewall";
  if (firewall.installed)
    return { check, ok: true, detail: "sandboxes reach only the API's and the model gateway's ports of this machine" };
  return {
    check,
    ok: false,
    detail: `the host firewall is not installed (${firewall.reason ?? "no reason given"}): this stack's containers reach every port of this machine`,
  };
}

async function checkDocker(): Promise<Check> {
  const ping = await dockerGet("/_ping");
  if ("status" in ping && ping.status === 200)
    return { check: "docker", ok: true, detail: "the Docker engine answers" };
  const why = "error" in ping ? ping.error : `HTTP ${ping.status}`;
  return { check: "docker", ok: false, detail: `the Docker engine does not answer (${why}): start dockerd` };
}

async function checkBaseImage(configured: string | undefined, docker: boolean): Promise<Check> {
  const image = configured ?? LOCAL_BASE_IMAGE;
  const check = "base-image";
  if (!docker)
    return { check, ok: false, detail: `base image ${image} not checked: the Docker engine does not answer` };
  const exists = async (name: string) => {
    const res = await dockerGet(`/images/${encodeURIComponent(name)}/json`);
    return "status" in res && res.status === 200;
  };
  if (await exists(image)) return { check, ok: true, detail: `the base image ${image} exists` };
  if (!configured && (await exists(PUBLIC_BASE_IMAGE))) {
    return { check, ok: true, detail: `the base image ${PUBLIC_BASE_IMAGE} exists (${LOCAL_BASE_IMAGE} does not)` };
  }
  const fix = configured ? "build it or change SVC_SANDBOX_BASE_IMAGE" : "run 'bash scripts/setup.sh'";
  return { check, ok: false, detail: `the base image ${image} does not exist: ${fix}` };
}

/** With SVC_SANDBOX_DRIVER=swarm, sandboxes are services: only a Swarm manager can create them. */
export async function checkSwarm(docker: boolean): Promise<Check> {
  const check = "swarm";
  if (!docker) return { check, ok: false, detail: "Swarm not checked: the Docker engine does not answer" };
  const res = await dockerGet("/info");
  const swarm =
    "status" in res && res.status === 200
      ? ((JSON.parse(res.body) as { Swarm?: { LocalNodeState?: string; ControlAvailable?: boolean } }).Swarm ?? {})
      : {};
  if (swarm.LocalNodeState === "active" && swarm.ControlAvailable)
    return { check, ok: true, detail: "the Docker engine is a Swarm manager (SVC_SANDBOX_DRIVER=swarm)" };
  const state = swarm.LocalNodeState === "active" ? "a Swarm worker, not a manager" : "not in a swarm";
  return {
    check,
    ok: false,
    detail: `SVC_SANDBOX_DRIVER=swarm but the Docker engine is ${state}: run 'docker swarm init' (or set SVC_SANDBOX_DRIVER=docker)`,
  };
}

/** Swarm mode deploys the stack and its sandboxes as services: only on an engine that is a Swarm manager. */
async function checkSwarmMode(docker: boolean): Promise<Check> {
  const check = "swarm";
  if (!docker) return { check, ok: false, detail: "Swarm not checked: the Docker engine does not answer" };
  try {
    await requireSwarmManager();
    return { check, ok: true, detail: "the Docker engine is a Swarm manager (swarm mode)" };
  } catch (err) {
    return { check, ok: false, detail: (err as Error).message };
  }
}

export async function doctor(options: { json?: boolean }): Promise<void> {
  const paths = selfHostPaths();
  const state = ensureState(paths);
  const model = configuredModel(state);
  const [health, docker] = await Promise.all([readHealth(localOrigin(state), 2000), checkDocker()]);
  const checks = [
    await checkStack(localOrigin(state), health),
    docker,
    await checkBaseImage(state.env.SVC_SANDBOX_BASE_IMAGE, docker.ok),
  ];
  if (state.mode === "swarm") checks.push(await checkSwarmMode(docker.ok));
  else if (state.env.SVC_SANDBOX_DRIVER === "swarm") checks.push(await checkSwarm(docker.ok));
  // The API installs it on the host and says so; in a container it cannot see it, and this CLI installed it.
  const firewall = checkHostFirewall(
    state.mode === "compose" && health
      ? await hostFirewallState(composeProject(paths), state.env)
      : health?.host_firewall,
  );
  if (firewall) checks.push(firewall);
  checks.push({
    check: "model",
    ok: model !== undefined,
    detail: model
      ? `model '${model.model}' at ${model.baseUrl}`
      : `no model is configured: ${MODEL_SETUP_COMMAND}; or per project: ${PROJECT_MODEL_COMMAND}`,
  });
  if (model) {
    const gateway = await checkGateway(model);
    checks.push(gateway);
    const fromSandboxes = gateway.ok ? await checkGatewayFromSandboxes(model) : undefined;
    if (fromSandboxes) checks.push(fromSandboxes);
  }
  const failed = checks.filter((c) => !c.ok).length;
  if (options.json) printJson({ ok: failed === 0, checks });
  else for (const c of checks) printLine(`${c.ok ? "✓" : "✗"} ${c.detail}`);
  if (failed) throw new CliError(`${failed} of ${checks.length} checks failed`);
}
