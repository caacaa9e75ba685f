import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { MODEL_TIMEOUT_S_DEFAULT } from "./env.ts";
import { PlanName } from "./plan.ts";
import { SandboxLinkMode } from "./sandbox-link.ts";
import {
  ACCOUNT_REF,
  commaList,
  DNS_NAME,
  httpUrl,
  int,
  oidcIssuer,
  PEM_PRIVATE_KEY,
  plansJson,
  postgresUrl,
  REGISTRY_ADDRESS,
  REPO_HOST_ENTRY,
  SWARM_CONSTRAINT,
  SWARM_PREFERENCE,
  swarmList,
} from "./setting-formats.ts";

/**
 * The stack's settings: environment variables the API reads at start (api/config.ts) and `svc self-host env`
 * stores, lists and checks. One catalogue, so a key the CLI accepts is a key the API understands, with the
 * same validator on both sides.
 */
export type SettingKind = "url" | "integer" | "number" | "choice" | "text" | "secret";

export type StackSetting = {
  key: string;
  meaning: string;
  kind: SettingKind;
  /** Never shown in full: listings mask it. */
  secret: boolean;
  /** Set by `svc self-host start` itself; `env set` points at the flag instead of storing it. */
  managedBy?: string;
  schema: z.ZodType;
};

/** Sandboxes' base image when built here (scripts/setup.sh); the public one otherwise. */
export const LOCAL_BASE_IMAGE = "svc-debian:bookworm";
export const PUBLIC_BASE_IMAGE = "debian:bookworm-slim";

/** Defaults of SVC_GIT_MAX_PUSH_MB and SVC_SANDBOX_DISK_MB, also for an API built without the environment (tests). */
export const GIT_MAX_PUSH_MB_DEFAULT = 200;
export const SANDBOX_DISK_MB_DEFAULT = 10_240;
/** Default of SVC_SESSION_CAP, the one plan's cap when SVC_PLANS is unset. */
export const SESSION_CAP_DEFAULT = 5;

function setting<K extends string, S extends z.ZodType>(
  key: K,
  kind: SettingKind,
  schema: S,
  meaning: string,
  extra: { secret?: boolean; managedBy?: string } = {},
): StackSetting & { key: K; schema: S } {
  return { key, meaning, kind, secret: kind === "secret" || extra.secret === true, managedBy: extra.managedBy, schema };
}

export const STACK_SETTINGS = [
  setting("SVC_HOME", "text", z.string().min(1).default(join(homedir(), ".svc")), "directory of the stack's data", {
    managedBy: "the SVC_HOME of the shell running 'svc self-host start'",
  }),
  setting("SVC_PORT", "integer", int(0, 65535).default(7700), "port the API listens on", {
    managedBy: "svc self-host start --port",
  }),
  setting(
    "SVC_LISTEN_HOST",
    "text",
    z.string().min(1).default("127.0.0.1"),
    "address the API listens on (sandboxes reach it on their network's gateway either way)",
    { managedBy: "svc self-host start --listen" },
  ),
  setting("DATABASE_URL", "url", postgresUrl.optional(), "PostgreSQL server to use instead of the embedded database", {
    secret: true,
  }),
  setting(
    "SVC_PUBLIC_URL",
    "url",
    httpUrl.optional(),
    "origin users and git clients reach the API at (default http://127.0.0.1:<port>)",
  ),
  setting(
    "SVC_TRUSTED_PROXY",
    "text",
    z.string().regex(DNS_NAME, "must be a DNS name").optional(),
    "host name of the proxy in front of the API whose X-Forwarded-For names the client (compose mode: edge)",
  ),
  setting(
    "SVC_PREVIEW_DOMAIN",
    "text",
    z.string().regex(DNS_NAME, "must be a DNS name").optional(),
    "wildcard DNS name for previews at <port>-<session>.<domain> (default localhost)",
  ),
  setting(
    "SVC_BOOTSTRAP_TOKEN_HASH",
    "text",
    z
      .string()
      .regex(/^[0-9a-f]{64}$/, "must be a hex SHA-256")
      .optional(),
    "SHA-256 of the admin token; the admin user is created or re-keyed with it",
    { managedBy: "svc self-host start (from selfhost.json)" },
  ),
  setting(
    "SVC_REPO_ACCESS_TOKEN",
    "secret",
    z.string().min(1).optional(),
    "token for private external repositories, sent only to SVC_REPO_ACCESS_URL",
  ),
  setting(
    "SVC_REPO_ACCESS_URL",
    "url",
    httpUrl.default("https://github.com/"),
    "where SVC_REPO_ACCESS_TOKEN or the GitHub App's tokens are sent",
  ),
  setting(
    "SVC_GITHUB_APP_ID",
    "integer",
    int(1).optional(),
    "GitHub App whose installation tokens reach private repositories (with the installation id and private key)",
  ),
  setting(
    "SVC_GITHUB_APP_INSTALLATION_ID",
    "integer",
    int(1).optional(),
    "installation of the GitHub App on the account owning the repositories",
  ),
  setting(
    "SVC_GITHUB_APP_PRIVATE_KEY",
    "secret",
    z.string().regex(PEM_PRIVATE_KEY, "must be a PEM private key (-----BEGIN ... PRIVATE KEY-----)").optional(),
    "the GitHub App's private key (PEM text); SVC_REPO_ACCESS_TOKEN wins when both are set",
  ),
  setting(
    "SVC_GITHUB_API_URL",
    "url",
    httpUrl.default("https://api.github.com"),
    "GitHub's REST API, where installation tokens are minted (GitHub Enterprise: https://<host>/api/v3)",
  ),
  setting(
    "SVC_REPO_ACCESS_ACCOUNTS",
    "text",
    commaList(ACCOUNT_REF, "an account's slug or id").optional(),
    "accounts (slugs or ids, comma-separated) whose projects get SVC_REPO_ACCESS_TOKEN or the GitHub App's tokens (default: the admin's own accounts)",
  ),
  setting(
    "SVC_REPO_ALLOWED_HOSTS",
    "text",
    commaList(REPO_HOST_ENTRY, "a host or host:port ([v6 address] in brackets)").optional(),
    "repository hosts (host or host:port, comma-separated) allowed although they resolve to loopback, private or link-local addresses",
  ),
  setting(
    "SVC_APP_PROVIDER",
    "choice",
    z.enum(["local", "none"]).default("local"),
    "where [[apps]] of svc.toml are deployed: local runs them as containers on this Docker; none deploys nothing",
  ),
  setting(
    "SVC_SLACK_SIGNING_SECRET",
    "secret",
    z.string().min(1).optional(),
    "Slack app's signing secret: Events API requests are checked with it",
  ),
  setting(
    "SVC_SLACK_BOT_TOKEN",
    "secret",
    z
      .string()
      .regex(/^xox[a-z]-\S+$/, "must be a Slack token (xoxb-…)")
      .optional(),
    "Slack bot token replies are posted with (chat.postMessage)",
  ),
  setting("SVC_SLACK_API_URL", "url", httpUrl.default("https://slack.com/api"), "Slack's Web API base URL"),
  setting(
    "SVC_OIDC_ISSUER",
    "url",
    oidcIssuer.optional(),
    "OpenID Connect provider (its issuer URL) people sign in to the dashboard with, 'Sign in with SSO' (with the client id and secret)",
  ),
  setting("SVC_OIDC_CLIENT_ID", "text", z.string().min(1).optional(), "svc's client id at the OpenID Connect provider"),
  setting(
    "SVC_OIDC_CLIENT_SECRET",
    "secret",
    z.string().min(1).optional(),
    "svc's client secret at the OpenID Connect provider; register <public URL>/auth/oidc/callback as its redirect URI",
  ),
  setting(
    "SVC_OIDC_ALLOWED_DOMAINS",
    "text",
    commaList(DNS_NAME, "an email domain").optional(),
    "email domains (comma-separated) whose people join the installation's account as members at their first SSO sign-in; others need an invitation (default: none)",
  ),
  setting("SVC_SECRETS_KEY", "secret", z.string().min(40).optional(), "key that encrypts project secrets", {
    managedBy: "svc self-host start (from selfhost.json)",
  }),
  setting(
    "SVC_ORCHESTRATOR",
    "choice",
    z.enum(["docker", "off"]).default("docker"),
    "docker runs sessions in containers; off serves the API without sessions",
  ),
  setting("SVC_SESSION_CAP", "integer", int(1, 10_000).default(SESSION_CAP_DEFAULT), "sessions that may run at once"),
  setting(
    "SVC_PLANS",
    "text",
    plansJson.optional(),
    'plans and their session caps as JSON, e.g. {"free":{"session_cap":2},"team":{"session_cap":10}} (default: one plan, selfhost, capped by SVC_SESSION_CAP)',
  ),
  setting(
    "SVC_DEFAULT_PLAN",
    "text",
    PlanName.optional(),
    "the plan of every account not given one of its own, a name of SVC_PLANS (default: the first it names)",
  ),
  setting(
    "SVC_SANDBOX_API_ORIGIN",
    "url",
    httpUrl.optional(),
    "the API as sandboxes reach it (default http://host.docker.internal:<port>)",
  ),
  setting(
    "SVC_SANDBOX_LINK",
    "choice",
    SandboxLinkMode.default("dial-out"),
    "how the API reaches sandboxes' daemons: dial-out (the default) has each daemon open a link to the API (SVC_SANDBOX_API_ORIGIN) that the API's requests travel over, so no route into a sandbox is needed; direct dials each container's address",
  ),
  setting(
    "SVC_LINK_BRIDGE_HOST",
    "text",
    z.union([z.literal("auto"), z.ipv4(), z.ipv6()]).default("127.0.0.1"),
    "address the API's bridges to dial-out sandboxes listen on, where its other replicas reach them: 127.0.0.1 for one API; auto (compose and swarm modes): the API container's own address on the stack's network",
  ),
  setting(
    "SVC_SANDBOX_NETWORKING",
    "choice",
    z.enum(["shared", "attached"]).default("shared"),
    "shared: an API on the host, sandboxes on one bridge; attached: an API in a container joins each sandbox's own network",
    { managedBy: "svc self-host start --mode" },
  ),
  setting(
    "SVC_SANDBOX_DRIVER",
    "choice",
    z.enum(["docker", "swarm"]).default("docker"),
    "docker runs each sandbox as a container on this engine; swarm as a one-task service on the Docker Swarm this engine manages",
  ),
  setting(
    "SVC_SWARM_CONSTRAINTS",
    "text",
    swarmList(SWARM_CONSTRAINT, "a placement constraint such as node.labels.svc-sandboxes==true").optional(),
    "placement constraints of sandbox services (comma-separated, e.g. node.labels.svc-sandboxes==true; swarm driver)",
  ),
  setting(
    "SVC_SWARM_PREFERENCES",
    "text",
    swarmList(SWARM_PREFERENCE, "spread=<descriptor>, e.g. spread=node.labels.zone")
      .transform((entries) => entries.map((e) => e.slice("spread=".length).trim()))
      .optional(),
    "node labels sandboxes are spread over (comma-separated, e.g. spread=node.labels.zone): each new one goes to the value whose nodes run the fewest of the installation's sandboxes (swarm driver)",
  ),
  setting(
    "SVC_REGISTRY",
    "text",
    z.string().regex(REGISTRY_ADDRESS, "must be a registry's host:port, e.g. 10.0.0.5:5000").optional(),
    "image registry (host:port) sandbox images are pushed to, so every Swarm node can pull them (swarm driver)",
  ),
  setting(
    "SVC_SANDBOX_SUBNET_POOL",
    "text",
    z
      .string()
      .regex(/^\d+\.\d+\.\d+\.\d+\/([0-9]|1[0-9]|2[0-8])$/, "must be an IPv4 CIDR of /28 or wider, e.g. 10.213.0.0/16")
      .default("10.213.0.0/16"),
    "addresses sandbox networks are carved from, a /28 each (attached networking)",
  ),
  setting(
    "SVC_SANDBOX_BASE_IMAGE",
    "text",
    z.string().min(1).optional(),
    "base image of sandboxes (default svc-debian:bookworm when present)",
  ),
  setting("SVC_SANDBOX_MEMORY_MB", "integer", int(128).default(2048), "memory limit of a sandbox, in MB"),
  setting("SVC_SANDBOX_CPUS", "number", z.coerce.number().min(0.1).max(64).default(1), "CPUs a sandbox may use"),
  setting("SVC_SANDBOX_PIDS", "integer", int(64).default(1024), "process limit of a sandbox"),
  setting(
    "SVC_SANDBOX_DISK_MB",
    "integer",
    int(0).default(SANDBOX_DISK_MB_DEFAULT),
    "disk a sandbox may write, in MB: past it the session is stopped, checked every 30 s (0 disables)",
  ),
  setting(
    "SVC_PROVISION_TIMEOUT_S",
    "integer",
    int(10).default(180),
    "seconds a session may take to start before it fails",
  ),
  setting("SVC_IDLE_TIMEOUT_S", "integer", int(10).default(1800), "seconds of inactivity before a session stops"),
  setting(
    "SVC_POOL_SIZE",
    "integer",
    int(0).max(8).default(1),
    "warm sandboxes kept ready per project with recent sessions (0 disables the pool)",
  ),
  setting(
    "SVC_LLM_BASE_URL",
    "url",
    httpUrl.optional(),
    "OpenAI-compatible model gateway sandboxes use (a loopback URL means this machine)",
  ),
  setting("SVC_LLM_API_KEY", "secret", z.string().min(1).optional(), "API key sent to the model gateway"),
  setting(
    "SVC_MODEL_TIMEOUT_S",
    "integer",
    int(5, 3600).default(MODEL_TIMEOUT_S_DEFAULT),
    "seconds the model gateway may send nothing (no answer, or no byte of a streamed one) before the turn fails with an error",
  ),
  setting("SVC_AGENT_MODEL", "text", z.string().min(1).optional(), "model the agents ask the gateway for"),
  setting(
    "SVC_BODY_LIMIT_BYTES",
    "integer",
    int(1).default(1024 * 1024),
    "largest request body the API accepts, in bytes",
  ),
  setting(
    "SVC_GIT_MAX_PUSH_MB",
    "integer",
    int(1).default(GIT_MAX_PUSH_MB_DEFAULT),
    "largest git push the API accepts, in MB; a bigger one is refused and nothing is written",
  ),
  setting(
    "SVC_CLI_BUNDLE",
    "text",
    z.string().min(1).optional(),
    "the CLI file /install.sh installs and svc update fetches (default dist/sandbox/svc.mjs of the API's package)",
  ),
  setting(
    "SVC_LOG_LEVEL",
    "choice",
    z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    "API log level: fatal, error, warn, info, debug, trace or silent",
  ),
] as const satisfies readonly StackSetting[];

type Catalogue = typeof STACK_SETTINGS;
type Shape = { [S in Catalogue[number] as S["key"]]: S["schema"] };

/** The catalogue as one zod object over an environment: what the API parses process.env with. */
export const StackEnv = z.object(Object.fromEntries(STACK_SETTINGS.map((s) => [s.key, s.schema])) as Shape);
export type StackEnv = z.infer<typeof StackEnv>;

export function stackSetting(key: string): StackSetting | undefined {
  return STACK_SETTINGS.find((s) => s.key === key);
}
