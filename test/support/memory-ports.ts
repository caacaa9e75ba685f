import { execFileSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  AppDeployRecord,
  AppsPort,
  EgressPort,
  ProjectApps,
  ProjectTriggers,
  RepositoryPort,
  SandboxRecord,
  SandboxRecords,
  SealPort,
  SecretsPort,
  SessionToProvision,
  TokenPort,
  TriggerPort,
} from "../../orchestrator/ports.ts";
import type { ProvisionerDeps, ProvisionerSettings } from "../../orchestrator/provisioning/provisioner.ts";
import type { SandboxDriver } from "../../orchestrator/sandbox/driver.ts";
import type { AppSpec, TriggerSpec } from "../../protocol/manifest.ts";
import type { Project } from "../../protocol/project.ts";
import type { SessionStatus } from "../../protocol/session.ts";

/**
 * The orchestrator's ports (orchestrator/ports.ts) over memory, as the API's database-backed ones behave: each read
 * returns a copy (a row, not a live object), `transition` moves a session only from the states it names, and so on.
 * The one thing on disk is a project's git repository (a small bare one in a temporary directory): the warm pool
 * bundles its default branch with the real git.
 */

const clone = <T>(value: T): T => structuredClone(value);

export function memoryProject(over: Partial<Project> = {}): Project {
  const id = over.id ?? randomUUID();
  return {
    id,
    account_id: randomUUID(),
    slug: `p-${id.slice(0, 8)}`,
    name: "memory project",
    repo_kind: "managed",
    repo_url: null,
    default_branch: "main",
    created_at: new Date().toISOString(),
    updated_at: new Date().toISOString(),
    ...over,
  };
}

/** A session as the API creates it, in `provisioning`. */
export function memorySession(project: Project, over: Partial<SessionToProvision> = {}): SessionToProvision {
  const sessionId = over.session_id ?? randomUUID();
  const now = new Date().toISOString();
  return {
    session_id: sessionId,
    project_id: project.id,
    status: "provisioning",
    branch: sessionId,
    base_ref: project.default_branch,
    agent_name: "build",
    agent_model: null,
    sandbox_url: null,
    error: null,
    progress: null,
    created_by: randomUUID(),
    trigger: null,
    created_at: now,
    updated_at: now,
    initial_prompt: null,
    ...over,
  };
}

export type MemorySessionRow = {
  session_id: string;
  project_id: string;
  status: SessionStatus;
  error: string | null;
  sandbox_url: string | null;
  progress: string | null;
  provisioner: string | null;
  /** Every progress line written, in order. */
  progressLog: string[];
};

export type MemorySandboxRow = SandboxRecord & {
  image: string | null;
  error: string | null;
  service_key_hash: string;
  service_key_sealed: string | null;
  last_activity_at: string | null;
};

/** project_sessions and session_sandboxes. */
export function memoryRecords() {
  const sessions = new Map<string, MemorySessionRow>();
  const sandboxes = new Map<string, MemorySandboxRow & { seq: number }>();
  let seq = 0;

  const records: SandboxRecords = {
    async insertSandbox(input) {
      const sandboxId = input.sandboxId ?? randomUUID();
      if (sandboxes.has(sandboxId)) throw new Error(`duplicate key: sandbox ${sandboxId}`);
      if (!sessions.has(input.sessionId)) throw new Error(`foreign key: no session ${input.sessionId}`);
      sandboxes.set(sandboxId, {
        sandbox_id: sandboxId,
        session_id: input.sessionId,
        project_id: input.projectId,
        status: "provisioning",
        container_id: null,
        url: null,
        token_id: input.tokenId,
        created_at: new Date(),
        image: null,
        error: null,
        service_key_hash: input.serviceKeyHash,
        service_key_sealed: input.serviceKeySealed,
        last_activity_at: null,
        seq: ++seq,
      });
      return sandboxId;
    },
    async updateSandbox(sandboxId, fields) {
      const row = sandboxes.get(sandboxId);
      if (!row) return;
      if (fields.status !== undefined) row.status = fields.status;
      if (fields.containerId !== undefined) row.container_id = fields.containerId;
      if (fields.image !== undefined) row.image = fields.image;
      if (fields.url !== undefined) row.url = fields.url;
      if (fields.error !== undefined) row.error = fields.error;
    },
    async currentSandbox(sessionId) {
      const rows = [...sandboxes.values()].filter((s) => s.session_id === sessionId).sort((a, b) => b.seq - a.seq);
      return rows[0] && toRecord(rows[0]);
    },
    async liveSandboxes() {
      return [...sandboxes.values()]
        .filter((s) => (s.status === "provisioning" || s.status === "active") && sessions.has(s.session_id))
        .map((s) => ({ ...toRecord(s), provisioner: sessions.get(s.session_id)!.provisioner }));
    },
    async provisioningSessions() {
      return [...sessions.values()]
        .filter((s) => s.status === "provisioning")
        .map((s) => ({ session_id: s.session_id, provisioner: s.provisioner }));
    },
    async setProgress(sessionId, progress) {
      const row = sessions.get(sessionId);
      if (row?.status !== "provisioning") return;
      row.progress = progress;
      row.progressLog.push(progress);
    },
    async transition(sessionId, from, to, fields = {}) {
      const row = sessions.get(sessionId);
      if (!row || !from.includes(row.status)) return false;
      row.status = to;
      row.progress = null;
      if (fields.error !== undefined) row.error = fields.error;
      if (fields.sandboxUrl !== undefined) row.sandbox_url = fields.sandboxUrl;
      if (fields.provisioner !== undefined) row.provisioner = fields.provisioner;
      return true;
    },
    async touchActivity(sandboxId, at) {
      const row = sandboxes.get(sandboxId);
      if (row) row.last_activity_at = at;
    },
  };

  function toRecord(row: MemorySandboxRow): SandboxRecord {
    return {
      sandbox_id: row.sandbox_id,
      session_id: row.session_id,
      project_id: row.project_id,
      status: row.status,
      container_id: row.container_id,
      url: row.url,
      token_id: row.token_id,
      created_at: new Date(row.created_at),
    };
  }

  return {
    records,
    /** A session row as the API's create writes it (status `provisioning` unless told). */
    addSession(session: SessionToProvision, options: { status?: SessionStatus; provisioner?: string | null } = {}) {
      sessions.set(session.session_id, {
        session_id: session.session_id,
        project_id: session.project_id,
        status: options.status ?? session.status,
        error: null,
        sandbox_url: null,
        progress: null,
        provisioner: options.provisioner ?? null,
        progressLog: [],
      });
    },
    /** A sandbox row written directly (what another process left behind). */
    addSandbox(row: Partial<MemorySandboxRow> & { session_id: string; project_id: string }): MemorySandboxRow {
      const full = {
        sandbox_id: randomUUID(),
        status: "active" as const,
        container_id: null,
        url: null,
        token_id: null,
        created_at: new Date(),
        image: null,
        error: null,
        service_key_hash: "hash",
        service_key_sealed: null,
        last_activity_at: null,
        ...row,
        seq: ++seq,
      };
      sandboxes.set(full.sandbox_id, full);
      return clone(full);
    },
    session: (sessionId: string) => {
      const row = sessions.get(sessionId);
      return row && clone(row);
    },
    sandbox: (sandboxId: string) => {
      const row = sandboxes.get(sandboxId);
      return row && clone(row);
    },
    sandboxesOf: (sessionId: string) =>
      [...sandboxes.values()].filter((s) => s.session_id === sessionId).map((s) => clone(s)),
    /** What the API's stop or remove does to the row (the provisioner learns of it only through `transition`). */
    setStatus(sessionId: string, status: SessionStatus) {
      const row = sessions.get(sessionId);
      if (row) row.status = status;
    },
  };
}
export type MemoryRecords = ReturnType<typeof memoryRecords>;

/** Project tokens: minted ones work until revoked. */
export function memoryTokens() {
  const minted: { id: string; token: string; userId: string; projectId: string; sessionId: string }[] = [];
  const revoked = new Set<string>();
  const port: TokenPort = {
    async mint(input) {
      const id = randomUUID();
      const token = `svc_pt_${randomBytes(18).toString("base64url")}`;
      minted.push({ id, token, ...input });
      return { id, token };
    },
    async revoke(tokenId) {
      revoked.add(tokenId);
    },
  };
  return {
    port,
    minted,
    /** Minted and not revoked. */
    live: () => minted.filter((t) => !revoked.has(t.id)),
    isLive: (id: string) => minted.some((t) => t.id === id) && !revoked.has(id),
  };
}

/** Project secrets with their revision: each `set` is a new revision. */
export function memorySecrets() {
  const store = new Map<string, { values: Record<string, string>; revision: number }>();
  const port: SecretsPort = {
    async values(projectId) {
      return clone(store.get(projectId) ?? { values: {}, revision: 0 });
    },
    async revision(projectId) {
      return store.get(projectId)?.revision ?? 0;
    },
  };
  return {
    port,
    set(projectId: string, values: Record<string, string>) {
      store.set(projectId, { values: { ...values }, revision: (store.get(projectId)?.revision ?? 0) + 1 });
    },
  };
}

const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@t",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@t",
};

/**
 * Each project's repository: a bare one on disk (created on first use) whose default branch `advance` moves, as a
 * merge would. `tips` reads the branches as the port does; `reachable = false` makes it answer undefined.
 */
export function memoryRepos() {
  const repos = new Map<string, { dir: string; branches: Map<string, string> }>();
  const git = (dir: string, ...args: string[]) =>
    execFileSync("git", ["-C", dir, ...args], { env: GIT_ENV })
      .toString()
      .trim();

  function repoOf(project: Project) {
    let repo = repos.get(project.id);
    if (!repo) {
      const dir = mkdtempSync(join(tmpdir(), "svc-memory-repo-"));
      git(dir, "init", "-q", "--bare", "-b", project.default_branch);
      const tree = git(dir, "hash-object", "-t", "tree", "-w", "--stdin");
      const commit = git(dir, "commit-tree", tree, "-m", "first");
      git(dir, "update-ref", `refs/heads/${project.default_branch}`, commit);
      repo = { dir, branches: new Map([[project.default_branch, commit]]) };
      repos.set(project.id, repo);
    }
    return repo;
  }

  const state = { reachable: true, createBranchFails: false };
  const port: RepositoryPort = {
    async gitDir(project) {
      return repoOf(project).dir;
    },
    async tips(project) {
      if (!state.reachable) return undefined;
      return new Map(repoOf(project).branches);
    },
    async createBranch(project, branch, sha) {
      const repo = repoOf(project);
      if (state.createBranchFails || repo.branches.has(branch)) return false;
      repo.branches.set(branch, sha);
      return true;
    },
  };
  return {
    port,
    state,
    /** The tip of a branch now. */
    tip: (project: Project, branch = project.default_branch) => repoOf(project).branches.get(branch),
    branches: (project: Project) => new Map(repoOf(project).branches),
    /** A new commit on the branch (default: the default branch), as a merge makes; returns its sha. */
    advance(project: Project, branch = project.default_branch): string {
      const repo = repoOf(project);
      const parent = repo.branches.get(branch)!;
      const tree = git(repo.dir, "rev-parse", `${parent}^{tree}`);
      const commit = git(repo.dir, "commit-tree", tree, "-p", parent, "-m", `moved ${Date.now()}`);
      git(repo.dir, "update-ref", `refs/heads/${branch}`, commit);
      repo.branches.set(branch, commit);
      return commit;
    },
  };
}

export function memoryEgress() {
  const proxied = new Set<string>();
  const port: EgressPort = { proxied: async (project) => proxied.has(project.id) };
  return { port, proxied };
}

/** Seals by prefixing: a test can tell a sealed key, and that it is not the key in clear. */
export const memorySeal: SealPort = (serviceKey) => `sealed:${Buffer.from(serviceKey).toString("base64")}`;

/**
 * The API processes sharing the database: which are alive, and whether this one leads (`leads`, or a function).
 */
export function memoryCluster(instanceId: string = randomUUID()) {
  const alive = new Set<string>([instanceId]);
  const state = { leads: true };
  return {
    instanceId,
    alive,
    state,
    lead: async () => state.leads,
    isAlive: async (id: string | null) => id !== null && alive.has(id),
  };
}

/** Default branches that moved, for `movedSince` cursors: a counter per move. */
function moves() {
  const log: string[] = [];
  return {
    move: (projectId: string) => void log.push(projectId),
    async movedSince(cursor: string | null) {
      const from = cursor === null ? log.length : Number(cursor);
      return { projectIds: [...new Set(log.slice(from))], cursor: String(log.length) };
    },
  };
}

/** app_deploys, and each project's apps as its default branch defines them. */
export function memoryApps() {
  const projects = new Map<string, ProjectApps>();
  const deploys: AppDeployRecord[] = [];
  const moved = moves();
  let clock = Date.now();
  // Distinct, increasing start times: "newest" never ties, as the database's clock_timestamp() does not.
  const tick = () => new Date(++clock);

  const port: AppsPort = {
    projectIds: async () => [...projects.keys()],
    project: async (projectId) => {
      const pa = projects.get(projectId);
      return pa && clone(pa);
    },
    movedSince: moved.movedSince,
    async insert(d) {
      const record: AppDeployRecord = {
        ...clone(d),
        id: randomUUID(),
        image: null,
        status: "building",
        container_id: null,
        endpoint: null,
        error: null,
        started_at: tick(),
        finished_at: null,
      };
      deploys.push(record);
      return clone(record);
    },
    async update(id, fields) {
      const d = deploys.find((x) => x.id === id);
      if (!d) return;
      for (const name of ["status", "image", "container_id", "endpoint", "error"] as const) {
        if (fields[name] !== undefined) (d as Record<string, unknown>)[name] = fields[name];
      }
      if (fields.finished) d.finished_at = tick();
    },
    async newest(projectId, app) {
      const d = deploys
        .filter((x) => x.project_id === projectId && x.app === app)
        .sort((a, b) => b.started_at.getTime() - a.started_at.getTime())[0];
      return d && clone(d);
    },
    async active(projectId) {
      return deploys
        .filter(
          (d) =>
            ["building", "starting", "live"].includes(d.status) &&
            (projectId === undefined || d.project_id === projectId),
        )
        .sort((a, b) => b.started_at.getTime() - a.started_at.getTime())
        .map(clone);
    },
    async previousLive(projectId, app, before, key) {
      const d = deploys
        .filter(
          (x) =>
            x.project_id === projectId &&
            x.app === app &&
            x.status === "superseded" &&
            x.started_at < before &&
            x.key !== key,
        )
        .sort((a, b) => b.started_at.getTime() - a.started_at.getTime())[0];
      return d && clone(d);
    },
  };
  return {
    port,
    /** The project's default branch now defines these apps at `commit` (a merge: the move is recorded). */
    setApps(project: Project, commit: string | null, apps: AppSpec[] | null) {
      projects.set(project.id, { project, commit, apps: apps && clone(apps) });
      moved.move(project.id);
    },
    deploys: () => deploys.map(clone),
    deploysOf: (app: string) => deploys.filter((d) => d.app === app).map(clone),
    /** A deploy row written directly (what another process left behind). */
    addDeploy(d: Partial<AppDeployRecord> & Pick<AppDeployRecord, "project_id" | "app" | "spec">): AppDeployRecord {
      const record: AppDeployRecord = {
        id: randomUUID(),
        revision: "0".repeat(40),
        key: "k",
        tip_key: "k",
        image: null,
        status: "live",
        trigger: "merge",
        rollback_of: null,
        container_id: null,
        endpoint: null,
        error: null,
        instance_id: null,
        started_at: tick(),
        finished_at: null,
        ...clone(d),
      };
      deploys.push(record);
      return clone(record);
    },
  };
}

/** Triggers of each project, claims as a set (the unique row), firings recorded. */
export function memoryTriggers() {
  const projects = new Map<string, TriggerSpec[] | null>();
  const schedules = new Map<string, { schedule: string | null; since: Date }>();
  const claims = new Set<string>();
  const fired: { projectId: string; slug: string; at: Date }[] = [];
  const moved = moves();
  const state: { refuse: string | null } = { refuse: null };
  const port: TriggerPort = {
    projects: async () =>
      [...projects].map(([projectId, triggers]): ProjectTriggers => ({ projectId, triggers: clone(triggers) })),
    project: async (projectId) =>
      projects.has(projectId) ? { projectId, triggers: clone(projects.get(projectId)!) } : undefined,
    async scheduled(projectId, slug, schedule) {
      const key = `${projectId}/${slug}`;
      const current = schedules.get(key);
      if (!current || current.schedule !== schedule) schedules.set(key, { schedule, since: new Date() });
      const claimed = [...claims]
        .filter((c) => c.startsWith(`${key}@`))
        .map((c) => new Date(c.slice(key.length + 1)))
        .sort((a, b) => b.getTime() - a.getTime());
      return { since: schedules.get(key)!.since, lastClaimed: claimed[0] ?? null };
    },
    movedSince: moved.movedSince,
    async claim(projectId, slug, at) {
      const key = `${projectId}/${slug}@${at.toISOString()}`;
      if (claims.has(key)) return false;
      claims.add(key);
      return true;
    },
    async fire(projectId, trigger, at) {
      if (state.refuse) return { error: state.refuse };
      fired.push({ projectId, slug: trigger.slug, at });
      return { sessionId: randomUUID() };
    },
  };
  return {
    port,
    fired,
    state,
    setTriggers(projectId: string, triggers: TriggerSpec[] | null) {
      projects.set(projectId, clone(triggers));
      moved.move(projectId);
    },
  };
}

/** A log that keeps what it was told, for tests that check what was (and was not) logged. */
export function memoryLog() {
  const lines: { msg: string; extra?: Record<string, unknown> }[] = [];
  const log = (msg: string, extra?: Record<string, unknown>) => void lines.push({ msg, extra });
  return { log, lines, text: () => lines.map((l) => `${l.msg} ${JSON.stringify(l.extra ?? {})}`).join("\n") };
}

/**
 * Everything createProvisioner needs, over memory and the given driver: the ports are returned too, for a test to
 * arrange and inspect. `settings` overrides the defaults (no pool, a model gateway with a key).
 */
export function memoryProvisionerDeps(
  driver: SandboxDriver,
  over: { settings?: Partial<ProvisionerSettings>; instanceId?: string } = {},
) {
  const records = memoryRecords();
  const tokens = memoryTokens();
  const secrets = memorySecrets();
  const repos = memoryRepos();
  const egress = memoryEgress();
  const logs = memoryLog();
  const closed: string[] = [];
  const deps: ProvisionerDeps = {
    records: records.records,
    tokens: tokens.port,
    secrets: secrets.port,
    repos: repos.port,
    sealServiceKey: memorySeal,
    egress: egress.port,
    driver,
    platformImage: async () => "svc-sandbox:test",
    settings: {
      sandboxApiOrigin: "http://api.invalid:7700",
      hostAlias: "host.docker.internal",
      provisionTimeoutMs: 5000,
      limits: { memoryBytes: 1 << 30, nanoCpus: 1e9, pids: 512 },
      llm: { baseUrl: "http://gateway.invalid/v1", apiKey: "sk-llm-gateway-secret", model: "gw-model" },
      defaultAgent: "build",
      poolSize: 0,
      // The in-memory driver's sandboxes answer at their endpoint; sandbox-reach.test.ts drives the dial-out links.
      sandboxLink: "direct",
      ...over.settings,
    },
    installationId: "inst",
    instanceId: over.instanceId ?? "me",
    onSandboxClosed: (sessionId) => void closed.push(sessionId),
    log: logs.log,
  };
  return { deps, records, tokens, secrets, repos, egress, logs, closed };
}
