import type { ProvisionerSettings } from "../orchestrator/provisioning/provisioner.ts";
import type { SandboxDriver } from "../orchestrator/sandbox/driver.ts";
import type { SlackSettings } from "./channels/slack-client.ts";
import type { Sql } from "./db/sql.ts";
import type { GitHubApp } from "./git/github-app.ts";
import type { PlanCatalogue } from "./plans/plans.ts";
import type { SessionSettings } from "./sessions/service.ts";
import type { OidcSettings } from "./sso/provider.ts";

/** What the API is started with (api/main.ts reads it from the environment; tests pass their own). */
export type AppOptions = {
  sql: Sql;
  /** The proxy in front (SVC_TRUSTED_PROXY): its X-Forwarded-For's last hop is the client's address. */
  trustedProxy?: string;
  /** Repositories, mirrors and git hooks live here. */
  dataDir: string;
  /** Origin under which this API is reachable (clone URLs are built from it); a function when known late. */
  publicUrl: string | (() => string);
  /** `accounts`: whom it serves (SVC_REPO_ACCESS_ACCOUNTS, slugs or ids); undefined: the admin's own accounts. */
  repoAccess?: { token: string | undefined; url: string; app?: GitHubApp; accounts?: string[] };
  /** Repository hosts (`host`, `host:port`) allowed whatever they resolve to (SVC_REPO_ALLOWED_HOSTS); default none. */
  repoAllowedHosts?: string[];
  /** Base64 AES-256 key for project secrets; without it the secrets API answers 503. */
  secretsKey?: string;
  /** Sessions run only when a sandbox driver is given. */
  orchestrator?: {
    driver: SandboxDriver;
    settings: SandboxSettings;
    /** Package root (images/sandbox, dist/sandbox) and the image the sandbox image builds on. */
    root: string;
    baseImage: string;
  };
  bodyLimit?: number;
  /** The largest git push accepted, in MB (SVC_GIT_MAX_PUSH_MB); default that setting's. */
  gitMaxPushMb?: number;
  /** How long one git request (clone, fetch, push) may run before its git processes are ended; default GIT_REQUEST_DEADLINE_MS. */
  gitRequestDeadlineMs?: number;
  logLevel?: string;
  /** Serve previews at `<port>-<session>.<domain>`; default `localhost` when the public URL is on loopback. */
  previewDomain?: string;
  /** This API process among those sharing the database (orchestrator/cluster.ts); default a fresh uuid. */
  instanceId?: string;
  /** The CLI file /install.sh installs; default this package's build (dist/sandbox/svc.mjs). */
  cliBundle?: string;
  /** Slack app credentials (svc channels); without a signing secret the events endpoint answers 503. */
  slack?: SlackSettings;
  /** Where `[[apps]]` deploy (SVC_APP_PROVIDER): local containers beside the sandboxes, or nowhere (default). */
  apps?: { provider: "local" | "none"; healthTimeoutMs?: number; resyncMs?: number };
  /** The stack's plans (SVC_PLANS, SVC_DEFAULT_PLAN); default one plan capped at the sandbox settings' sessionCap. */
  plans?: PlanCatalogue;
  /** Single sign-on through an OpenID Connect provider (SVC_OIDC_*); without it the sign-in page offers none. */
  oidc?: OidcSettings;
  /**
   * The address sandbox bridges listen on (SVC_LINK_BRIDGE_HOST, resolved at start): default loopback; in a stack,
   * this replica's address on the stack's network, where the other replicas reach its bridges.
   */
  linkBridgeHost?: string;
};

export type SandboxSettings = ProvisionerSettings & SessionSettings;
