import { execa } from "execa";
import type { ApiHealth } from "../../../protocol/health.ts";
import { createHostFirewall, hostPortsOf, type IptablesRun } from "../../../protocol/host-firewall.ts";
import { StackEnv } from "../../../protocol/stack-settings.ts";
import { warn } from "../../output.ts";

type FirewallState = NonNullable<ApiHealth["host_firewall"]>;

/** This machine's iptables, waiting for the lock the engine and other stacks may hold. */
const iptables: IptablesRun = async (args) => {
  const result = await execa("iptables", ["-w", ...args], { reject: false });
  // A missing binary has no exit code: its spawn error is the reason.
  return {
    exitCode: result.exitCode ?? -1,
    stdout: String(result.stdout ?? ""),
    stderr: String(result.stderr || (result.exitCode === undefined ? result.message : "")),
  };
};

/**
 * A compose stack's rules. Its API runs in a container and can neither change nor see the host's firewall, so the
 * CLI installs the same chain from the host. Each sandbox has a bridge of its own that comes and goes with it, so
 * sandboxes are matched by source: every sandbox network is carved from the subnet pool, and the API containers'
 * own network is not. Sandboxes reach the API containers on their network, not through the host: the only host
 * ports they need are those of their URLs that point at the host (a loopback model gateway, which they call as
 * host.docker.internal, their network's gateway). The egress proxy is in the API containers.
 */
export function composeFirewall(project: string, env: Record<string, string>) {
  const pool = StackEnv.shape.SVC_SANDBOX_SUBNET_POOL.parse(env.SVC_SANDBOX_SUBNET_POOL);
  return {
    chain: `SVC-${project}`,
    holder: project,
    match: ["-s", pool],
    ports: hostPortsOf([env.SVC_SANDBOX_API_ORIGIN, env.SVC_LLM_BASE_URL], "host.docker.internal"),
  };
}

/** At start: closes this machine to the stack's sandboxes, replacing the rules of an earlier start. */
export async function installHostFirewall(
  project: string,
  env: Record<string, string>,
  run: IptablesRun = iptables,
): Promise<void> {
  const { chain, holder, match, ports } = composeFirewall(project, env);
  const firewall = createHostFirewall({ run });
  try {
    await firewall.open(chain, holder, ports);
    await firewall.cover(chain, match);
  } catch (err) {
    await firewall.close(chain, holder).catch(() => {});
    warn(`host firewall not installed (${(err as Error).message}): sandboxes reach every port of this machine`);
  }
}

/** At stop and uninstall: the stack's rules go. */
export async function removeHostFirewall(
  project: string,
  env: Record<string, string>,
  run: IptablesRun = iptables,
): Promise<void> {
  const { chain, holder } = composeFirewall(project, env);
  await createHostFirewall({ run })
    .close(chain, holder)
    .catch((err: Error) => warn(`could not remove the host firewall: ${err.message}`));
}

/** What the doctor reports, read from iptables itself: the API, in a container, cannot tell. */
export async function hostFirewallState(
  project: string,
  env: Record<string, string>,
  run: IptablesRun = iptables,
): Promise<FirewallState> {
  const { chain, match } = composeFirewall(project, env);
  const listed = await run(["-S", "INPUT"]);
  if (listed.exitCode !== 0) return { installed: false, reason: listed.stderr.trim().split("\n")[0] };
  const covered = (await run(["-C", "INPUT", ...match, "-j", chain])).exitCode === 0;
  if (covered && (await run(["-C", chain, "-j", "DROP"])).exitCode === 0) return { installed: true };
  return { installed: false, reason: `no chain ${chain} in iptables: 'svc self-host start' installs it` };
}
