import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SESSION_ENV_FILE_NAME } from "../protocol/env.ts";

/** Where a claim writes the session's environment: the agent's home, readable by its shells' plugin only. */
export const sessionEnvFile = (agentHome: string) => join(agentHome, SESSION_ENV_FILE_NAME);

/**
 * An opencode plugin that puts the session's environment into every shell the agent runs: a name with a value is
 * set, one with `null` is removed (left undefined: the runtime's spawn leaves such a name out, even one its own
 * process environment holds). opencode's process environment cannot change once it runs (a pooled sandbox's
 * starts before any session owns it; a secret may change while a session runs), but opencode asks `shell.env`
 * before each command, so a claim or a change only writes the file this reads, and the conversation goes on.
 */
export function writeSessionEnvPlugin(agentHome: string): string {
  const dir = join(agentHome, ".svc-plugins");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "session-env.js");
  const source = `import { readFileSync } from "node:fs";
const read = () => { try { return JSON.parse(readFileSync(${JSON.stringify(sessionEnvFile(agentHome))}, "utf8")); } catch { return {}; } };
export default {
  id: "svc-session-env",
  server: async () => ({ "shell.env": async (_input, output) => {
    for (const [name, value] of Object.entries(read())) { output.env[name] = value === null ? undefined : value; }
  } }),
};
`;
  writeFileSync(file, source);
  return file;
}

/** The session's variables over `base`: a name with a value is set, one with `null` removed. */
export function withSessionEnv(base: Record<string, string>, env: SessionEnv): Record<string, string> {
  const out = { ...base };
  for (const [name, value] of Object.entries(env)) {
    if (value === null) delete out[name];
    else out[name] = value;
  }
  return out;
}

/** A session's variables: a value sets a name, `null` removes one its container was created with. */
export type SessionEnv = Record<string, string | null>;

export function writeSessionEnv(agentHome: string, env: SessionEnv): void {
  writeFileSync(sessionEnvFile(agentHome), JSON.stringify(env), { mode: 0o600 });
}
