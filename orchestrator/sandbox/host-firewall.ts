import type { IptablesRun } from "../../protocol/host-firewall.ts";
import { spawnBuffered } from "../process-spawner.ts";

/** The host's iptables, waiting for the lock other programs (the engine, other stacks) may hold. */
export const iptables: IptablesRun = async (args) => {
  const result = await spawnBuffered({ file: "iptables", args: ["-w", ...args] });
  // A missing binary has no exit code: its spawn error is the reason.
  return { exitCode: result.exitCode ?? -1, stdout: result.stdout, stderr: result.stderr || (result.failure ?? "") };
};
