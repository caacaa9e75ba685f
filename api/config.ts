import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";

const Env = z.object({
  SVC_HOME: z.string().min(1).default(join(homedir(), ".svc")),
  SVC_PORT: z.coerce.number().int().min(0).max(65535).default(7700),
  // Sandboxes reach the API over the Docker bridge, so the default listens beyond loopback.
  SVC_LISTEN_HOST: z.string().min(1).default("0.0.0.0"),
  DATABASE_URL: z.string().url().optional(),
  /** Origin users and git clients reach the API at; default http://127.0.0.1:<port>. */
  SVC_PUBLIC_URL: z.string().url().optional(),
  /** SHA-256 of the admin token the self-host CLI generated; the admin user is created or re-keyed with it. */
  SVC_BOOTSTRAP_TOKEN_HASH: z
    .string()
    .regex(/^[0-9a-f]{64}$/, "must be a hex SHA-256")
    .optional(),
  /** Token for private external repositories (e.g. a GitHub token), sent only to SVC_REPO_ACCESS_URL. */
  SVC_REPO_ACCESS_TOKEN: z.string().min(1).optional(),
  SVC_REPO_ACCESS_URL: z.string().url().default("https://github.com/"),
  SVC_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  SVC_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type ApiConfig = {
  home: string;
  port: number;
  host: string;
  databaseUrl: string | undefined;
  pgliteDir: string;
  dataDir: string;
  publicUrl: string;
  repoAccess: { token: string | undefined; url: string };
  bootstrapTokenHash: string | undefined;
  bodyLimit: number;
  logLevel: z.infer<typeof Env>["SVC_LOG_LEVEL"];
};

/** The only place the API reads process.env; a bad value stops the start with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ApiConfig {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`invalid configuration: ${issue.path.join(".")}: ${issue.message}`);
  }
  const e = parsed.data;
  return {
    home: e.SVC_HOME,
    port: e.SVC_PORT,
    host: e.SVC_LISTEN_HOST,
    databaseUrl: e.DATABASE_URL,
    pgliteDir: join(e.SVC_HOME, "data", "pglite"),
    dataDir: join(e.SVC_HOME, "data"),
    publicUrl: e.SVC_PUBLIC_URL ?? `http://127.0.0.1:${e.SVC_PORT}`,
    repoAccess: { token: e.SVC_REPO_ACCESS_TOKEN, url: e.SVC_REPO_ACCESS_URL },
    bootstrapTokenHash: e.SVC_BOOTSTRAP_TOKEN_HASH,
    bodyLimit: e.SVC_BODY_LIMIT_BYTES,
    logLevel: e.SVC_LOG_LEVEL,
  };
}
