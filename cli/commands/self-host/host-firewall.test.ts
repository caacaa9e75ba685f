import { describe, expect, it, vi } from "vitest";
import type { IptablesRun } from "../../../protocol/host-firewall.ts";
import { composeFirewall, hostFirewallState, installHostFirewall } from "./host-firewall.ts";

/** An iptables that holds no rule yet and does what it is told; every call is kept. */
function emptyIptables() {
  const calls: string[][] = [];
  const run: IptablesRun = async (args) => {
    calls.push(args);
    return { exitCode: args[0] === "-C" ? 1 : 0, stdout: "", stderr: "" };
  };
  return { run, calls };
}

describe("compose mode's host firewall (the CLI installs it: the API is in a container)", () => {
  const project = "svc-1a2b3c4d";

  it("matches sandboxes by the subnet pool and opens only the host's ports their URLs point at", () => {
    expect(composeFirewall(project, {})).toEqual({
      chain: "SVC-svc-1a2b3c4d",
      holder: project,
      match: ["-s", "10.213.0.0/16"],
      ports: [],
    });
    const gateway = { SVC_LLM_BASE_URL: "http://127.0.0.1:11434/v1", SVC_SANDBOX_SUBNET_POOL: "10.99.0.0/20" };
    expect(composeFirewall(project, gateway)).toMatchObject({ match: ["-s", "10.99.0.0/20"], ports: [11434] });
    // A gateway elsewhere is not this machine's port; an API origin on the host is.
    const remote = { SVC_LLM_BASE_URL: "https://api.example.com/v1", SVC_SANDBOX_API_ORIGIN: "http://localhost:7700" };
    expect(composeFirewall(project, remote).ports).toEqual([7700]);
  });

  it("installs answers, the gateway's port and DROP in the stack's chain, jumped to for the pool's sources", async () => {
    const { run, calls } = emptyIptables();
    await installHostFirewall(project, { SVC_LLM_BASE_URL: "http://localhost:11434/v1" }, run);
    expect(calls.filter(([op]) => op === "-I" || op === "-A").map((args) => args.join(" "))).toEqual([
      "-I SVC-svc-1a2b3c4d 1 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
      "-A SVC-svc-1a2b3c4d -j DROP",
      "-I SVC-svc-1a2b3c4d 2 -p tcp --dport 11434 -m comment --comment svc-holder:svc-1a2b3c4d -j ACCEPT",
      "-I INPUT 1 -s 10.213.0.0/16 -j SVC-svc-1a2b3c4d",
    ]);
  });

  it("warns, and removes the chain it made, when iptables refuses part of it", async () => {
    const { run: accepting, calls } = emptyIptables();
    const run: IptablesRun = async (args) =>
      args[0] === "-I" && args[1] === "INPUT"
        ? { exitCode: 4, stdout: "", stderr: "iptables: Permission denied (you must be root).\n" }
        : accepting(args);
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      await installHostFirewall(project, {}, run);
      expect(stderr.mock.calls.map(([text]) => String(text))).toEqual([
        "warning: host firewall not installed (iptables -I INPUT 1 -s 10.213.0.0/16 -j SVC-svc-1a2b3c4d failed: " +
          "iptables: Permission denied (you must be root).): sandboxes reach every port of this machine\n",
      ]);
    } finally {
      stderr.mockRestore();
    }
    expect(calls.slice(-2)).toEqual([
      ["-F", "SVC-svc-1a2b3c4d"],
      ["-X", "SVC-svc-1a2b3c4d"],
    ]);
  });

  it("reads whether it is installed from iptables, with the reason when it cannot", async () => {
    const installed: IptablesRun = async () => ({ exitCode: 0, stdout: "", stderr: "" });
    expect(await hostFirewallState(project, {}, installed)).toEqual({ installed: true });
    const { run: empty } = emptyIptables();
    expect(await hostFirewallState(project, {}, empty)).toEqual({
      installed: false,
      reason: "no chain SVC-svc-1a2b3c4d in iptables: 'svc self-host start' installs it",
    });
    const missing: IptablesRun = async () => ({
      exitCode: -1,
      stdout: "",
      stderr: "Command failed with ENOENT: iptables -w -S INPUT\nspawn iptables ENOENT",
    });
    expect(await hostFirewallState(project, {}, missing)).toEqual({
      installed: false,
      reason: "Command failed with ENOENT: iptables -w -S INPUT",
    });
  });
});
