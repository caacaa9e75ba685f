import { execa } from "execa";
import type { IptablesRun } from "../../protocol/host-firewall.ts";

/** The host's iptables, waiting for the lock other programs (the engine, other stacks) may hold. */
export const iptables: IptablesRun = async (args) => {
  const result = await execa("iptables", ["-w", ...args], { reject: false });
  // A missing binary has no exit code: its spawn error is the reason.
  return {
    exitCode: result.exitCode ?? -1,
    stdout: String(result.stdout ?? ""),
    stderr: String(result.stderr || (result.exitCode === undefined ? result.message : "")),
  };
};
