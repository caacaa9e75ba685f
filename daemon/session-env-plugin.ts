import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SESSION_ENV_FILE_NAME } from "../protocol/env.ts";

/** Where a claim writes the session's environment: the agent's home, readable by its shells' plugin only. */
export const sessionEnvFile = (agentHome: string) => join(agentHome, SESSION_ENV_FILE_NAME);

/**
 * An opencode plugin that adds the session's environment to every shell the agent runs. A pooled sandbox's
 * opencode starts before any session owns it; its process environment cannot change after, but opencode asks
 * `shell.env` before each command, so a claim only writes the file this reads.
 */
export function writeSessionEnvPlugin(agentHome: string): string {
  const dir = join(agentHome, ".svc-plugins");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "session-env.js");
  const source = `import { readFileSync } from "node:fs";
const read = () => { try { return JSON.parse(readFileSync(${JSON.stringify(sessionEnvFile(agentHome))}, "utf8")); } catch { return {}; } };
export default {
  id: "svc-session-env",
  server: async () => ({ "shell.env": async (_input, output) => { Object.assign(output.env, read()); } }),
};
`;
  writeFileSync(file, source);
  return file;
}

export function writeSessionEnv(agentHome: string, env: Record<string, string>): void {
  writeFileSync(sessionEnvFile(agentHome), JSON.stringify(env), { mode: 0o600 });
}
