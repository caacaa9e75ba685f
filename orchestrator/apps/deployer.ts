import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { AppSpec } from "../../protocol/manifest.ts";
import type { Project } from "../../protocol/project.ts";
import { redact } from "../../protocol/redact.ts";
import { plainText } from "../../protocol/terminal-text.ts";
import { whileLeading } from "../cluster.ts";
import { OrchestratorError } from "../errors.ts";
import type {
  AppDeployRecord,
  AppsPort,
  Log,
  NewAppDeploy,
  ProjectApps,
  RepositoryPort,
  SecretsPort,
} from "../ports.ts";
import { createBuildKeys } from "./build-key.ts";
import type { AppProvider } from "./provider.ts";
import { waitHealthy } from "./wait-healthy.ts";

const LEAD_CHECK_MS = 5_000;
const RESYNC_MS = 60_000;
export const HEALTH_TIMEOUT_MS = 60_000;

export type DeployerDeps = {
  port: AppsPort;
  provider: AppProvider;
  repos: RepositoryPort;
  secrets: SecretsPort;
  platformImage: () => Promise<string>;
  installationId: string;
  healthTimeoutMs?: number;
  /** How often everything is resynced and reconciled (a vanished container re-created); default a minute. */
  resyncMs?: number;
  /** How often leadership is checked; default LEAD_CHECK_MS. */
  leadCheckMs?: number;
  /** Told when an app's serving deploy changed, so callers drop what they cached about where it answers. */
  onSwitched: (projectId: string, app: string) => void;
  log: Log;
};

/** A failed build keeps the end of the failing step's output: what the user needs to fix it. */
function describeFailure(err: unknown): string {
  if (!(err instanceof OrchestratorError)) return (err as Error).message;
  const output = err.log.trim().split("\n").slice(-20).join("\n").slice(-4000);
  return [err.message, output].filter(Boolean).join("\n");
}

/**
 * Deploys the `[[apps]]` of each project's default branch, only while this process leads the cluster. An app is
 * deployed when its build key at the branch's tip differs from the one its newest deploy attempt was started for
 * (so a failed build is not retried every tick, and a rollback is not undone); the default branch moves only by a
 * merge, so a change in an open CR deploys nothing. A deploy switches traffic only once its health check answers:
 * until then, and when it fails, the previous deploy keeps serving. One deploy at a time per app.
 */
export function createAppDeployer(deps: DeployerDeps) {
  const { port, provider, log } = deps;
  const buildKey = createBuildKeys();
  /** Deploys this process runs (or has queued): the reconciler leaves them alone. */
  const inFlight = new Set<string>();
  let lead: () => Promise<boolean> = async () => false;
  let isAlive: (instanceId: string | null) => Promise<boolean> = async () => false;
  let instanceId: string | null = null;
  let running = false;
  let moveCursor: string | null = null;
  let timers: NodeJS.Timeout[] = [];

  /** One deploy at a time per app (`<project>/<app>`), one sync at a time per project. */
  const oneAtATime = createKeyedMutex();
  const serial = (key: string, fn: () => Promise<void>) =>
    oneAtATime(key, fn).catch((err) => log("app deploy failed", { app: key, error: (err as Error).message }));

  async function keyAt(pa: ProjectApps & { commit: string }, spec: AppSpec): Promise<string> {
    return buildKey(await deps.repos.gitDir(pa.project), pa.commit, spec, await deps.platformImage());
  }

  async function run(d: AppDeployRecord, project: Project): Promise<void> {
    let containerId: string | undefined;
    const secretValues: string[] = [];
    const owner = { installationId: deps.installationId, projectId: project.id, app: d.app, deployId: d.id };
    try {
      const image = await provider.image({
        gitDir: await deps.repos.gitDir(project),
        revision: d.revision,
        spec: d.spec,
        key: d.key,
        platformImage: await deps.platformImage(),
        owner,
      });
      await port.update(d.id, { status: "starting", image });
      const { values } = await deps.secrets.values(project.id);
      const missing = d.spec.env.filter((name) => values[name] === undefined);
      if (missing.length > 0) {
        throw new Error(
          `missing project secret${missing.length > 1 ? "s" : ""} ${missing.join(", ")} (svc secrets set ${missing[0]}=…)`,
        );
      }
      const env: Record<string, string> = Object.fromEntries(d.spec.env.map((name) => [name, values[name]!]));
      secretValues.push(...Object.values(env));
      env.PORT = String(d.spec.port);
      const started = await provider.run({
        name: `svc-app-${d.app}-${d.id.slice(0, 8)}`,
        image,
        spec: d.spec,
        env,
        owner,
      });
      containerId = started.id;
      await port.update(d.id, { container_id: started.id, endpoint: started.endpoint });
      await waitHealthy({
        provider,
        id: started.id,
        endpoint: started.endpoint,
        path: d.spec.health_path,
        timeoutMs: deps.healthTimeoutMs ?? HEALTH_TIMEOUT_MS,
        secretNames: d.spec.env,
      });
      // The new deploy serves first; only then do the old ones go.
      const previous = (await port.active(project.id)).filter(
        (o) => o.app === d.app && o.status === "live" && o.id !== d.id,
      );
      await port.update(d.id, { status: "live", finished: true });
      for (const old of previous) await port.update(old.id, { status: "superseded" });
      deps.onSwitched(project.id, d.app);
      for (const old of previous) {
        if (old.container_id) await provider.remove(old.container_id).catch(() => {});
      }
    } catch (err) {
      const message = plainText(redact(describeFailure(err), secretValues));
      log("app deploy failed", { project: project.id, app: d.app, deploy: d.id, error: message });
      await port.update(d.id, { status: "failed", error: message, finished: true });
      if (containerId) await provider.remove(containerId).catch(() => {});
    } finally {
      inFlight.delete(d.id);
    }
  }

  /** Records the deploy and queues it behind the app's running one; resolves with the record at once. */
  async function start(deploy: NewAppDeploy, project: Project): Promise<AppDeployRecord> {
    const d = await port.insert({ ...deploy, instance_id: instanceId });
    inFlight.add(d.id);
    void serial(`${project.id}/${d.app}`, () => run(d, project));
    return d;
  }

  /** The app's live deploy stops: it is no longer in the default branch's manifest. */
  async function stopRemoved(d: AppDeployRecord, commit: string): Promise<void> {
    await port.update(d.id, { status: "stopped", error: `removed from svc.toml at ${commit.slice(0, 7)}` });
    deps.onSwitched(d.project_id, d.app);
    if (d.container_id) await provider.remove(d.container_id).catch(() => {});
  }

  async function sync(projectId: string): Promise<void> {
    if (!running) return;
    await serial(projectId, async () => {
      const pa = await port.project(projectId);
      if (!running || !pa?.apps || !pa.commit) return;
      const tip = { ...pa, commit: pa.commit };
      const names = new Set(pa.apps.map((a) => a.name));
      await Promise.all(
        pa.apps.map(async (spec) => {
          const key = await keyAt(tip, spec);
          const newest = await port.newest(projectId, spec.name);
          if (newest && newest.status !== "stopped" && newest.tip_key === key) return;
          // Recorded here, run on the app's queue: the next sync already sees this attempt.
          await start(
            {
              project_id: projectId,
              app: spec.name,
              revision: tip.commit,
              key,
              tip_key: key,
              spec,
              trigger: "merge",
              rollback_of: null,
            },
            pa.project,
          );
        }),
      );
      for (const d of await port.active(projectId)) {
        if (d.status === "live" && !names.has(d.app))
          await serial(`${projectId}/${d.app}`, () => stopRemoved(d, tip.commit));
      }
    });
  }

  async function resync(): Promise<void> {
    if (!running) return;
    await reconcile();
    await Promise.all((await port.projectIds()).map(sync));
  }

  /**
   * Docker and the history agree: a container whose deploy is neither active nor this process's is removed; a
   * deploy left building or starting by a process that died fails; a live deploy whose container vanished is
   * re-created by a new deploy of the same revision.
   */
  async function reconcile(): Promise<void> {
    const containers = await provider.list(deps.installationId);
    const active = await port.active();
    const activeIds = new Set(active.map((d) => d.id));
    for (const c of containers) {
      const id = c.owner.deployId;
      if (id && (activeIds.has(id) || inFlight.has(id))) continue;
      await provider.remove(c.id).catch(() => {});
      log("app reconciler removed an orphaned container", { container: c.id, deploy: id });
    }
    for (const d of active) {
      if (inFlight.has(d.id)) continue;
      if (d.status !== "live") {
        if (await isAlive(d.instance_id)) continue;
        await port.update(d.id, { status: "failed", error: "the deploy was interrupted", finished: true });
        if (d.container_id) await provider.remove(d.container_id).catch(() => {});
        continue;
      }
      if (containers.find((c) => c.owner.deployId === d.id)?.running) continue;
      const pa = await port.project(d.project_id);
      if (!pa) continue;
      await port.update(d.id, { status: "stopped", error: "its container vanished: re-created by the next deploy" });
      if (d.container_id) await provider.remove(d.container_id).catch(() => {});
      await start({ ...d, trigger: "reconcile", rollback_of: null }, pa.project);
    }
  }

  /** Deploys and reconciles while `lead()` says so. */
  const followLead = () =>
    whileLeading({
      lead,
      name: "app deployer check",
      log,
      async start() {
        running = true;
        log("app deployer started on this API process");
        moveCursor = (await port.movedSince(null)).cursor;
        await resync();
      },
      async tick() {
        const moved = await port.movedSince(moveCursor);
        moveCursor = moved.cursor;
        await Promise.all(moved.projectIds.map(sync));
      },
      stop() {
        running = false;
        log("app deployer stopped: this API process no longer leads");
      },
    });

  return {
    /** Deploys what changed on the project's default branch (a merge, a push, a fetch); a no-op unless leading. */
    sync,

    /** Deploys the default branch's tip of one app now; undefined when the manifest there has no such app. */
    async redeploy(projectId: string, app: string): Promise<AppDeployRecord | undefined> {
      const pa = await port.project(projectId);
      const spec = pa?.apps?.find((a) => a.name === app);
      if (!pa || !spec || !pa.commit) return undefined;
      const key = await keyAt({ ...pa, commit: pa.commit }, spec);
      return start(
        {
          project_id: projectId,
          app,
          revision: pa.commit,
          key,
          tip_key: key,
          spec,
          trigger: "redeploy",
          rollback_of: null,
        },
        pa.project,
      );
    },

    /** Deploys the revision that was live before the current one; undefined when there is none. */
    async rollback(projectId: string, app: string): Promise<AppDeployRecord | undefined> {
      const pa = await port.project(projectId);
      const live = (await port.active(projectId)).find((d) => d.app === app && d.status === "live");
      if (!pa || !live) return undefined;
      const previous = await port.previousLive(projectId, app, live.started_at, live.key);
      if (!previous) return undefined;
      const newest = await port.newest(projectId, app);
      return start(
        {
          ...previous,
          tip_key: newest?.tip_key ?? live.tip_key,
          trigger: "rollback",
          rollback_of: live.id,
        },
        pa.project,
      );
    },

    logs: provider.logs,

    /** Follows leadership (orchestrator/cluster.ts): deploys and reconciles while this process leads. */
    async start(cluster: {
      instanceId: string;
      lead: () => Promise<boolean>;
      isAlive: (id: string | null) => Promise<boolean>;
    }): Promise<void> {
      lead = cluster.lead;
      isAlive = cluster.isAlive;
      instanceId = cluster.instanceId;
      const checkLead = followLead();
      for (const t of timers) clearInterval(t);
      timers = [
        setInterval(() => void checkLead(), deps.leadCheckMs ?? LEAD_CHECK_MS),
        setInterval(
          () => void resync().catch((err) => log("app resync failed", { error: (err as Error).message })),
          deps.resyncMs ?? RESYNC_MS,
        ),
      ];
      await checkLead();
    },
    stop(): void {
      for (const t of timers) clearInterval(t);
      timers = [];
      running = false;
    },
  };
}

export type AppDeployer = ReturnType<typeof createAppDeployer>;
