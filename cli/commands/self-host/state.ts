import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { TOKEN_PREFIX } from "../../../protocol/token.ts";
import { type CliSettings, readCliEnv } from "../../config.ts";
import { CliError } from "../../errors.ts";

export const DEFAULT_PORT = 7700;
/** Loopback only: sandboxes reach the API on their network's gateway, other machines not at all. */
export const DEFAULT_LISTEN = "127.0.0.1";

/**
 * embedded: one API process on PGlite; compose: API, PostgreSQL and edge containers (compose/compose.yaml); swarm:
 * the same as a Docker Swarm stack (compose/stack.yaml), sandboxes as Swarm services.
 */
export const StackMode = z.enum(["embedded", "compose", "swarm"]);
export type StackMode = z.infer<typeof StackMode>;

/** `$SVC_HOME/selfhost.json`: the stack's own settings. Secrets here never go into the database. */
const SelfHostState = z.object({
  port: z.number().int().min(1).max(65535).default(DEFAULT_PORT),
  /** The address the API listens on, set with `start --listen`. */
  listen: z.string().min(1).default(DEFAULT_LISTEN),
  admin_token: z.string().startsWith(TOKEN_PREFIX),
  /** Key for secrets at rest (AES-256-GCM), base64. */
  secrets_key: z.string().min(40),
  /** How the stack runs, set with `start --mode` and remembered. */
  mode: StackMode.default("embedded"),
  /** API containers in compose and swarm mode (`start --api-replicas`), behind the one published port. */
  api_replicas: z.number().int().min(1).max(8).default(1),
  /** The compose stack's PostgreSQL password, made on its first start. */
  postgres_password: z.string().min(16).optional(),
  /** Values set with `svc self-host env set`, passed to the stack at start. */
  env: z.record(z.string(), z.string()).default({}),
  /** The credential wizard ran to its end once: later starts no longer ask. */
  wizard_done: z.boolean().default(false),
  /**
   * The installations this home's stacks have been (each mode's data is one; a restore makes a new one), as their APIs
   * told them at start and stop: the id their containers, networks and volumes are labelled with, and the images
   * their sessions and apps ran. What `stop`, a change of mode and `svc uninstall` look for on the engine.
   */
  installations: z
    .array(z.object({ id: z.string().min(1), mode: StackMode, images: z.array(z.string()).default([]) }))
    .default([]),
});
export type SelfHostState = z.infer<typeof SelfHostState>;

export type SelfHostPaths = { home: string; state: string; pid: string; logs: string; apiLog: string };

export function selfHostPaths(env: CliSettings = readCliEnv()): SelfHostPaths {
  const home = env.home ?? join(homedir(), ".svc");
  return {
    home,
    state: join(home, "selfhost.json"),
    pid: join(home, "run", "api.pid"),
    logs: join(home, "logs"),
    apiLog: join(home, "logs", "api.log"),
  };
}

export function readState(paths: SelfHostPaths): SelfHostState | undefined {
  let text: string;
  try {
    text = readFileSync(paths.state, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const parsed = SelfHostState.safeParse(JSON.parse(text));
  if (!parsed.success) throw new CliError(`${paths.state} is damaged: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

/** The home and the file hold the admin token and secrets: owner-only, even when they were created wider. */
function tightenModes(paths: SelfHostPaths): void {
  if ((statSync(paths.home).mode & 0o077) !== 0) chmodSync(paths.home, 0o700);
  if ((statSync(paths.state).mode & 0o077) !== 0) chmodSync(paths.state, 0o600);
}

export function writeState(paths: SelfHostPaths, state: SelfHostState): void {
  mkdirSync(paths.home, { recursive: true, mode: 0o700 });
  const tmp = `${paths.state}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, paths.state);
  tightenModes(paths);
}

/** Reads the state, creating it (fresh admin token and secrets key) on first use. */
export function ensureState(paths: SelfHostPaths): SelfHostState {
  const existing = readState(paths);
  if (existing) {
    tightenModes(paths);
    return existing;
  }
  const state: SelfHostState = {
    port: DEFAULT_PORT,
    listen: DEFAULT_LISTEN,
    mode: "embedded",
    api_replicas: 1,
    admin_token: TOKEN_PREFIX + randomBytes(32).toString("base64url"),
    secrets_key: randomBytes(32).toString("base64"),
    env: {},
    wizard_done: false,
    installations: [],
  };
  writeState(paths, state);
  return state;
}

/** Where this machine's CLI reaches the API: loopback unless the API listens on one other address only. */
export function localOrigin(state: SelfHostState): string {
  const { listen, port } = state;
  if (listen === "0.0.0.0" || listen === "::" || listen.startsWith("127.") || listen === "localhost") {
    return `http://127.0.0.1:${port}`;
  }
  return listen.includes(":") ? `http://[${listen}]:${port}` : `http://${listen}:${port}`;
}

/** A model is configured when the gateway and the model name are (a gateway may take no key). */
export function configuredModel(state: SelfHostState): { baseUrl: string; model: string; apiKey?: string } | undefined {
  const { SVC_LLM_BASE_URL: baseUrl, SVC_AGENT_MODEL: model, SVC_LLM_API_KEY: apiKey } = state.env;
  return baseUrl && model ? { baseUrl, model, apiKey } : undefined;
}
