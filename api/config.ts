import { join } from "node:path";
import type { DriverChoice } from "../orchestrator/sandbox/backend.ts";
import type { SandboxLimits } from "../orchestrator/sandbox/driver.ts";
import { SANDBOX_API_ALIAS } from "../protocol/env.ts";
import { StackEnv } from "../protocol/stack-settings.ts";
import type { GitHubApp } from "./git/github-app.ts";
import type { PlanCatalogue } from "./plans/plans.ts";
import type { OidcSettings } from "./sso/provider.ts";

export type ApiConfig = {
  home: string;
  port: number;
  host: string;
  databaseUrl: string | undefined;
  pgliteDir: string;
  dataDir: string;
  publicUrl: string;
  previewDomain: string | undefined;
  trustedProxy: string | undefined;
  /** `accounts`: whom the stack-wide credential serves (SVC_REPO_ACCESS_ACCOUNTS); undefined: the admin's accounts. */
  repoAccess: { token: string | undefined; url: string; app: GitHubApp | undefined; accounts: string[] | undefined };
  /** Repository hosts allowed whatever they resolve to (SVC_REPO_ALLOWED_HOSTS); none by default. */
  repoAllowedHosts: string[];
  secretsKey: string | undefined;
  orchestrator: {
    enabled: boolean;
    sessionCap: number;
    sandboxApiOrigin: string;
    /** SVC_SANDBOX_LINK: whether the API dials daemons or they dial it (protocol/sandbox-link.ts). */
    sandboxLink: StackEnv["SVC_SANDBOX_LINK"];
    /** SVC_LINK_BRIDGE_HOST: an address, or `auto` (resolved at start: api/sandbox-links/bridge-host.ts). */
    linkBridgeHost: string;
    networking: { kind: "shared" } | { kind: "attached"; subnetPool: string };
    /** Where daemons that dial out reach this API through a Unix socket (api/http/sandbox-socket.ts), if anywhere. */
    linkSocketDir: string | undefined;
    /** SVC_SANDBOX_DRIVER, with the swarm driver's registry and placement (SVC_REGISTRY, SVC_SWARM_*). */
    driver: DriverChoice;
    baseImage: string | undefined;
    limits: SandboxLimits;
    provisionTimeoutMs: number;
    idleMs: number;
    poolSize: number;
    /** A sandbox whose writable layer passes this is stopped (SVC_SANDBOX_DISK_MB); 0: never. */
    diskLimitMb: number;
    /** `timeoutS`: seconds the gateway may send nothing before a turn fails (SVC_MODEL_TIMEOUT_S). */
    llm: { baseUrl?: string; apiKey?: string; model?: string; timeoutS: number };
  };
  /** SVC_PLANS and SVC_DEFAULT_PLAN; undefined without SVC_PLANS: one plan capped by SVC_SESSION_CAP. */
  plans: PlanCatalogue | undefined;
  /** Where `[[apps]]` deploy: local containers on this engine, or none. */
  apps: { provider: StackEnv["SVC_APP_PROVIDER"] };
  bootstrapTokenHash: string | undefined;
  bodyLimit: number;
  /** The largest git push accepted (SVC_GIT_MAX_PUSH_MB). */
  gitMaxPushMb: number;
  /** The CLI bundle served at /v1/cli/svc.mjs; undefined: this package's own build. */
  cliBundle: string | undefined;
  logLevel: StackEnv["SVC_LOG_LEVEL"];
  slack: { signingSecret: string | undefined; botToken: string | undefined; apiUrl: string };
  /** Single sign-on (SVC_OIDC_*); undefined: the sign-in page offers none. */
  oidc: OidcSettings | undefined;
};

/** A GitHub App is used when all three of its settings are; a partial one is a mistake worth stopping for. */
function githubApp(e: StackEnv): GitHubApp | undefined {
  const parts = [e.SVC_GITHUB_APP_ID, e.SVC_GITHUB_APP_INSTALLATION_ID, e.SVC_GITHUB_APP_PRIVATE_KEY];
  if (parts.every((p) => p === undefined)) return undefined;
  if (
    e.SVC_GITHUB_APP_ID === undefined ||
    e.SVC_GITHUB_APP_INSTALLATION_ID === undefined ||
    !e.SVC_GITHUB_APP_PRIVATE_KEY
  ) {
    throw new Error(
      "invalid configuration: SVC_GITHUB_APP_ID, SVC_GITHUB_APP_INSTALLATION_ID and SVC_GITHUB_APP_PRIVATE_KEY go together",
    );
  }
  return {
    appId: e.SVC_GITHUB_APP_ID,
    installationId: e.SVC_GITHUB_APP_INSTALLATION_ID,
    privateKey: e.SVC_GITHUB_APP_PRIVATE_KEY,
    apiUrl: e.SVC_GITHUB_API_URL,
  };
}

/**
 * Single sign-on needs its provider, client id and secret together; a part of them (allowed domains alone included)
 * is a mistake worth stopping for, named by what is missing. Allowed domains are optional: without them only people
 * who already have a user here (invited) sign in with SSO.
 */
function oidc(e: StackEnv): OidcSettings | undefined {
  const given = {
    SVC_OIDC_ISSUER: e.SVC_OIDC_ISSUER,
    SVC_OIDC_CLIENT_ID: e.SVC_OIDC_CLIENT_ID,
    SVC_OIDC_CLIENT_SECRET: e.SVC_OIDC_CLIENT_SECRET,
  };
  if (Object.values(given).every((v) => v === undefined) && e.SVC_OIDC_ALLOWED_DOMAINS === undefined) return undefined;
  const missing = Object.entries(given).flatMap(([key, value]) => (value === undefined ? [key] : []));
  if (e.SVC_OIDC_ISSUER === undefined || e.SVC_OIDC_CLIENT_ID === undefined || e.SVC_OIDC_CLIENT_SECRET === undefined)
    throw new Error(
      `invalid configuration: single sign-on also needs ${missing.join(", ")} (SVC_OIDC_ISSUER, SVC_OIDC_CLIENT_ID and SVC_OIDC_CLIENT_SECRET go together)`,
    );
  return {
    issuer: e.SVC_OIDC_ISSUER,
    clientId: e.SVC_OIDC_CLIENT_ID,
    clientSecret: e.SVC_OIDC_CLIENT_SECRET,
    allowedDomains: e.SVC_OIDC_ALLOWED_DOMAINS ?? [],
  };
}

/** The plans and the default one, which must be among them. */
function plans(e: StackEnv): PlanCatalogue | undefined {
  if (!e.SVC_PLANS) {
    if (e.SVC_DEFAULT_PLAN === undefined) return undefined;
    throw new Error("invalid configuration: SVC_DEFAULT_PLAN names a plan of SVC_PLANS, which is unset");
  }
  const names = Object.keys(e.SVC_PLANS);
  const chosen = e.SVC_DEFAULT_PLAN ?? names[0]!;
  if (!names.includes(chosen))
    throw new Error(`invalid configuration: SVC_DEFAULT_PLAN: SVC_PLANS has no plan '${chosen}' (${names.join(", ")})`);
  return { plans: e.SVC_PLANS, default: chosen, setting: "SVC_PLANS" };
}

/**
 * An API beside its engine (sandboxes on a shared network, which compose and swarm mode's containers never use; the
 * engine on a local socket) shares the host's directories with the sandboxes the Docker driver starts: the driver
 * mounts this one into each that dials out. An API in a container of its own that took this path anyway would
 * mount a directory of the engine's host with no socket in it, and its daemons would dial over TCP as before.
 */
function linkSocketDir(e: StackEnv, dockerHost: string | undefined): string | undefined {
  const localEngine = !dockerHost || dockerHost.startsWith("unix://");
  const shared = e.SVC_SANDBOX_NETWORKING !== "attached";
  if (e.SVC_SANDBOX_DRIVER === "swarm" || e.SVC_SANDBOX_LINK !== "dial-out" || !localEngine || !shared)
    return undefined;
  return join(e.SVC_HOME, "run", "sandbox-link");
}

/** The only place the API reads process.env (keys and validators: protocol/stack-settings.ts); a bad value stops
 * the start with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ApiConfig {
  const parsed = StackEnv.safeParse(env);
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
    previewDomain: e.SVC_PREVIEW_DOMAIN,
    trustedProxy: e.SVC_TRUSTED_PROXY,
    repoAccess: {
      token: e.SVC_REPO_ACCESS_TOKEN,
      url: e.SVC_REPO_ACCESS_URL,
      app: githubApp(e),
      accounts: e.SVC_REPO_ACCESS_ACCOUNTS,
    },
    repoAllowedHosts: e.SVC_REPO_ALLOWED_HOSTS ?? [],
    secretsKey: e.SVC_SECRETS_KEY,
    orchestrator: {
      enabled: e.SVC_ORCHESTRATOR === "docker",
      sessionCap: e.SVC_SESSION_CAP,
      // An API in a container is on every sandbox's network under its alias; one on the host is their gateway.
      sandboxApiOrigin:
        e.SVC_SANDBOX_API_ORIGIN ??
        `http://${e.SVC_SANDBOX_NETWORKING === "attached" ? SANDBOX_API_ALIAS : "host.docker.internal"}:${e.SVC_PORT}`,
      // A Swarm sandbox has no address the API could dial (swarm-driver.ts): its daemon always dials out.
      sandboxLink: e.SVC_SANDBOX_DRIVER === "swarm" ? "dial-out" : e.SVC_SANDBOX_LINK,
      linkBridgeHost: e.SVC_LINK_BRIDGE_HOST,
      linkSocketDir: linkSocketDir(e, env.DOCKER_HOST),
      networking:
        e.SVC_SANDBOX_NETWORKING === "attached"
          ? { kind: "attached", subnetPool: e.SVC_SANDBOX_SUBNET_POOL }
          : { kind: "shared" },
      driver:
        e.SVC_SANDBOX_DRIVER === "swarm"
          ? {
              kind: "swarm",
              registry: e.SVC_REGISTRY,
              constraints: e.SVC_SWARM_CONSTRAINTS ?? [],
              spread: e.SVC_SWARM_PREFERENCES ?? [],
            }
          : { kind: "docker" },
      baseImage: e.SVC_SANDBOX_BASE_IMAGE,
      limits: {
        memoryBytes: e.SVC_SANDBOX_MEMORY_MB * 1024 * 1024,
        nanoCpus: Math.round(e.SVC_SANDBOX_CPUS * 1e9),
        pids: e.SVC_SANDBOX_PIDS,
      },
      provisionTimeoutMs: e.SVC_PROVISION_TIMEOUT_S * 1000,
      idleMs: e.SVC_IDLE_TIMEOUT_S * 1000,
      poolSize: e.SVC_POOL_SIZE,
      diskLimitMb: e.SVC_SANDBOX_DISK_MB,
      llm: {
        baseUrl: e.SVC_LLM_BASE_URL,
        apiKey: e.SVC_LLM_API_KEY,
        model: e.SVC_AGENT_MODEL,
        timeoutS: e.SVC_MODEL_TIMEOUT_S,
      },
    },
    plans: plans(e),
    apps: { provider: e.SVC_APP_PROVIDER },
    bootstrapTokenHash: e.SVC_BOOTSTRAP_TOKEN_HASH,
    bodyLimit: e.SVC_BODY_LIMIT_BYTES,
    gitMaxPushMb: e.SVC_GIT_MAX_PUSH_MB,
    cliBundle: e.SVC_CLI_BUNDLE,
    logLevel: e.SVC_LOG_LEVEL,
    slack: { signingSecret: e.SVC_SLACK_SIGNING_SECRET, botToken: e.SVC_SLACK_BOT_TOKEN, apiUrl: e.SVC_SLACK_API_URL },
    oidc: oidc(e),
  };
}
