import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.ts";

const DAEMON = new URL("../../daemon/main.ts", import.meta.url).pathname;

export type TestDaemon = { child: ChildProcess; port: number; agentPort: number; base: string };

/**
 * The real svc-agent from source on loopback, outside a container, with its own workspace and home; resolves once
 * /svc/health answers. `agentCommand` stands in for the agent runtime (it listens on `agentPort`, or not at all).
 */
export async function startDaemon(options: {
  serviceKey: string;
  sessionId: string;
  agentCommand: string[];
  env?: Record<string, string>;
  stdio?: "inherit" | "ignore";
}): Promise<TestDaemon> {
  const port = await freePort();
  const agentPort = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", DAEMON], {
    env: {
      ...process.env,
      SVC_TOKEN: options.serviceKey,
      SVC_SESSION_ID: options.sessionId,
      SVC_SERVICE_PORT: String(port),
      SVC_LISTEN_HOST: "127.0.0.1",
      SVC_AGENT_PORT: String(agentPort),
      SVC_WORKSPACE: mkdtempSync(join(tmpdir(), "svc-ws-")),
      SVC_AGENT_HOME: mkdtempSync(join(tmpdir(), "svc-home-")),
      SVC_AGENT_COMMAND: JSON.stringify(options.agentCommand),
      ...options.env,
    },
    stdio: ["ignore", options.stdio ?? "inherit", options.stdio ?? "inherit"],
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  while (
    !(await fetch(`${base}/svc/health`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error("the daemon did not start");
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, port, agentPort, base };
}

/**
 * Until the daemon's agent runtime runs. A session with no prompt starts it at its first use: here, as a client
 * would, by asking for its event stream (503 while it boots).
 */
export async function runtimeRunning(base: string, serviceKey: string, timeoutMs = 60_000): Promise<void> {
  const events = await fetch(`${base}/svc/events`, { headers: { authorization: `Bearer ${serviceKey}` } });
  await events.body?.cancel();
  const deadline = Date.now() + timeoutMs;
  while ((await (await fetch(`${base}/svc/health`)).json()).agent.state !== "running") {
    if (Date.now() > deadline) throw new Error("the agent runtime did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
}
