import type { DeployStatus, DeployTrigger } from "../protocol/app.ts";
import type { AppSpec, TriggerSpec } from "../protocol/manifest.ts";
import type { Project } from "../protocol/project.ts";
import type { SandboxStatus, Session, SessionStatus } from "../protocol/session.ts";

/**
 * What the orchestrator needs from the API's world, as small interfaces. The API implements each one and passes
 * it in (api/services.ts); the orchestrator never imports the API.
 */

/** A session as the provisioner needs it: SPEC's attributes plus the prompt it starts with. */
export type SessionToProvision = Session & { initial_prompt: string | null };

/** Mints and revokes the project token a sandbox's CLI uses (SVC_CLI_TOKEN). */
export type TokenPort = {
  mint(input: { userId: string; projectId: string; sessionId: string }): Promise<{ id: string; token: string }>;
  revoke(tokenId: string): Promise<void>;
};

/** Decrypted project secrets, injected as plain env vars. */
export type SecretsPort = {
  values(projectId: string): Promise<{ values: Record<string, string>; revision: number }>;
  /** The current revision alone: checking a pooled sandbox against it decrypts nothing. */
  revision(projectId: string): Promise<number>;
};

/** The project's repository, as fresh as the branch cut needs it. */
export type RepositoryPort = {
  /** A local git directory holding the project's objects (managed repo or mirror). */
  gitDir(project: Project): Promise<string>;
  /** Branch name to tip SHA, read live; undefined when the repository cannot be reached. */
  tips(project: Project): Promise<Map<string, string> | undefined>;
  /** Creates `branch` at `sha`; false when it could not. */
  createBranch(project: Project, branch: string, sha: string): Promise<boolean>;
};

/**
 * Whether the project's default branch limits its sandboxes' egress (`[sandbox] egress` of svc.toml): such a
 * sandbox gets a network with no way out but the API's egress proxy, which enforces the list.
 */
export type EgressPort = { proxied(project: Project): Promise<boolean> };

/**
 * Daemons that dial out (SVC_SANDBOX_LINK=dial-out): the API serves each sandbox's link and gives it an endpoint of
 * its own, so the API needs no route into the sandbox. Whoever creates a sandbox announces its key first.
 */
export type SandboxLinkPort = {
  /**
   * This API replica's address on the stack's network, put in its sandboxes' link URLs so the edge sends each link
   * to the replica waiting for it; undefined for an API alone.
   */
  replica?: string;
  /** A link presenting this service key (by its hash) is `sandboxId`'s; said before the sandbox starts. */
  expect(serviceKeyHash: string, sandboxId: string): void;
  /** The URL the sandbox's daemon answers at once its link is up; rejects after `timeoutMs`. */
  waitFor(sandboxId: string, timeoutMs: number): Promise<string>;
  /** The sandbox is gone: its key no longer links and its endpoint closes. */
  forget(sandboxId: string): void;
};

/** Seals a sandbox's service key at rest; null when the server has no key to seal with. */
export type SealPort = (serviceKey: string) => string | null;

export type SandboxRecord = {
  sandbox_id: string;
  session_id: string;
  project_id: string;
  status: SandboxStatus;
  container_id: string | null;
  url: string | null;
  token_id: string | null;
  created_at: Date;
};

/** The session and sandbox rows the provisioner, reconciler and sweeper read and write. */
export type SandboxRecords = {
  insertSandbox(input: {
    sessionId: string;
    projectId: string;
    serviceKeyHash: string;
    serviceKeySealed: string | null;
    tokenId: string;
    /** A warm-pool sandbox's id, fixed when its container was made; else a new one. */
    sandboxId?: string;
  }): Promise<string>;
  updateSandbox(
    sandboxId: string,
    fields: { status?: SandboxStatus; containerId?: string; image?: string; url?: string; error?: string },
  ): Promise<void>;
  /** The session's newest sandbox. */
  currentSandbox(sessionId: string): Promise<SandboxRecord | undefined>;
  /** Provisioning and active sandboxes, with the API process provisioning their session. */
  liveSandboxes(): Promise<(SandboxRecord & { provisioner: string | null })[]>;
  provisioningSessions(): Promise<{ session_id: string; provisioner: string | null }[]>;
  /** What a provisioning session is doing now (`building image: step 2/5 RUN make`); any transition clears it. */
  setProgress(sessionId: string, progress: string): Promise<void>;
  /** Moves a session only if it is still in one of `from`; false when it was not. */
  transition(
    sessionId: string,
    from: SessionStatus[],
    to: SessionStatus,
    fields?: { error?: string | null; sandboxUrl?: string | null; provisioner?: string },
  ): Promise<boolean>;
  touchActivity(sandboxId: string, at: string): Promise<void>;
};

/** A project's triggers as its default branch's manifest defines them (the last good manifest when invalid). */
export type ProjectTriggers = {
  projectId: string;
  /** Null when the repository could not be read just now: the project's jobs stay as they are. */
  triggers: TriggerSpec[] | null;
};

/** What the trigger scheduler needs: the manifests' triggers, the firing claims, sessions, runtime state. */
export type TriggerPort = {
  /** Every project with its triggers. */
  projects(): Promise<ProjectTriggers[]>;
  /** One project's triggers, re-read now; undefined when the project is gone. */
  project(projectId: string): Promise<ProjectTriggers | undefined>;
  /**
   * Records that `schedule` runs for this trigger (from now on, unless it already ran with this schedule; null:
   * it no longer runs) and
   * returns since when, with the newest instant claimed so far: what a catch-up after a restart needs.
   */
  scheduled(
    projectId: string,
    slug: string,
    schedule: string | null,
  ): Promise<{ since: Date; lastClaimed: Date | null }>;
  /**
   * Projects whose default branch moved since `cursor` (a CR merged, or a push or fetch that changed its manifest,
   * on any API process; null: start from now), and the cursor to ask with next time: how a change received by a
   * standby reaches the leader's jobs within a lead check.
   */
  movedSince(cursor: string | null): Promise<{ projectIds: string[]; cursor: string }>;
  /** Claims one scheduled instant (a unique row): true for exactly one caller across every API process. */
  claim(projectId: string, slug: string, scheduledAt: Date): Promise<boolean>;
  /**
   * Creates the session as `sessions new --prompt` would, recording the trigger on it and the outcome on the
   * claim and the trigger's state; a refusal (the session cap, a vanished project) comes back as `error`.
   */
  fire(projectId: string, trigger: TriggerSpec, scheduledAt: Date): Promise<{ sessionId: string } | { error: string }>;
};

export type Log = (msg: string, extra?: Record<string, unknown>) => void;

/** One deploy of an app, as the deployer records it (table app_deploys). */
export type AppDeployRecord = {
  id: string;
  project_id: string;
  app: string;
  revision: string;
  /** The app's build inputs' hash at `revision`. */
  key: string;
  /** The default branch's key when this deploy was started: the next change of it is what redeploys. A rollback
   * keeps the key it rolled back from here, so the next tick does not undo it. */
  tip_key: string;
  spec: AppSpec;
  image: string | null;
  status: DeployStatus;
  trigger: DeployTrigger;
  rollback_of: string | null;
  container_id: string | null;
  endpoint: string | null;
  error: string | null;
  instance_id: string | null;
  started_at: Date;
  finished_at: Date | null;
};

export type NewAppDeploy = Pick<
  AppDeployRecord,
  "project_id" | "app" | "revision" | "key" | "tip_key" | "spec" | "trigger" | "rollback_of"
>;

/** A project's apps as its default branch defines them. */
export type ProjectApps = {
  project: Project;
  /** The default branch's tip; null when there is none yet. */
  commit: string | null;
  /** Null when the repository could not be read just now: the project's deploys stay as they are. */
  apps: AppSpec[] | null;
};

/** What the app deployer needs: the manifests' apps, the deploy history, the moves of default branches. */
export type AppsPort = {
  projectIds(): Promise<string[]>;
  project(projectId: string): Promise<ProjectApps | undefined>;
  /** As TriggerPort.movedSince: default branches other API processes saw move. */
  movedSince(cursor: string | null): Promise<{ projectIds: string[]; cursor: string }>;
  insert(deploy: NewAppDeploy & { instance_id: string | null }): Promise<AppDeployRecord>;
  update(
    id: string,
    fields: Partial<Pick<AppDeployRecord, "status" | "image" | "container_id" | "endpoint" | "error">> & {
      finished?: boolean;
    },
  ): Promise<void>;
  /** The app's newest deploy attempt, any status. */
  newest(projectId: string, app: string): Promise<AppDeployRecord | undefined>;
  /** Deploys in `building`, `starting` or `live`, of one project or all. */
  active(projectId?: string): Promise<AppDeployRecord[]>;
  /** The newest `superseded` deploy of the app started before `before` with another key: what a rollback returns to. */
  previousLive(projectId: string, app: string, before: Date, key: string): Promise<AppDeployRecord | undefined>;
};
