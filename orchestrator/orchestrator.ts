import { hostPortsOf } from "../protocol/host-firewall.ts";
import { createAppDeployer } from "./apps/deployer.ts";
import { createLocalAppProvider } from "./apps/local-provider.ts";
import { type Cluster, whileLeading } from "./cluster.ts";
import { createDiskWatch } from "./disk-watch.ts";
import { createIdleSweeper } from "./idle-sweeper.ts";
import { platformImageResolver } from "./images/platform-image.ts";
import type { AppsPort } from "./ports.ts";
import { createProvisioner, type ProvisionerDeps } from "./provisioning/provisioner.ts";
import { createReconciler } from "./reconciler.ts";
import { createSandboxAccess } from "./sandbox/access.ts";

const TICK_MS = 30_000;

export type BackgroundWorkOptions = {
  cluster: Cluster;
  idleMs: number;
  /** SVC_SANDBOX_DISK_MB (absent or 0: no watch), and how often it looks (default the other work's tick). */
  disk?: { limitMb: number; tickMs?: number };
  /**
   * Subscribes to sandboxes that stopped answering (a dial-out link that dropped): each makes the leader reconcile a
   * moment later instead of at its next tick, so a task killed under a session fails it within seconds.
   */
  onSandboxLost?: (listener: () => void) => () => void;
};

/** How long after a lost sandbox the reconciler looks: the engine needs a moment to record its task's end. */
const LOST_SANDBOX_DELAY_MS = 2_000;

export type OrchestratorDeps = Omit<ProvisionerDeps, "platformImage"> & {
  /** Package root (images/sandbox, dist/sandbox) and the image the sandbox image builds on. */
  root: string;
  baseImage: string;
  /** The manifests' apps and their deploy history; without it (SVC_APP_PROVIDER=none) nothing is deployed. */
  apps?: {
    port: AppsPort;
    onSwitched: (projectId: string, app: string) => void;
    healthTimeoutMs?: number;
    resyncMs?: number;
  };
};

/**
 * The orchestrator as one process runs it: the provisioner the API's session routes call, and the background
 * work (reconciler, idle sweeper) that runs while this process leads the cluster.
 */
export function createOrchestrator(deps: OrchestratorDeps) {
  const platformImage = platformImageResolver(deps.driver, { root: deps.root, baseImage: deps.baseImage });
  const provisioner = createProvisioner({ ...deps, platformImage });

  const apps =
    deps.apps &&
    createAppDeployer({
      ...deps.apps,
      provider: createLocalAppProvider({ driver: deps.driver, limits: deps.settings.limits }),
      repos: deps.repos,
      secrets: deps.secrets,
      platformImage,
      installationId: deps.installationId,
      log: deps.log,
    });

  /**
   * Reconciles at start and then, with the idle sweep and the disk watch, on a timer, while this process leads (the
   * others keep asking, so one takes over within a tick when the leader dies). Returns the function that stops.
   */
  function startBackgroundWork(options: BackgroundWorkOptions): () => void {
    const { cluster } = options;
    const reconcile = createReconciler({
      driver: deps.driver,
      records: deps.records,
      provisioner,
      installationId: deps.installationId,
      isAlive: cluster.isAlive,
      log: deps.log,
    });
    const sweep = createIdleSweeper({ records: deps.records, provisioner, idleMs: options.idleMs, log: deps.log });
    const leaderOnly = (name: string, tick: () => Promise<unknown>) =>
      whileLeading({ lead: cluster.lead, name, log: deps.log, tick });
    const reconcileWhileLeading = leaderOnly("reconcile", reconcile);
    // A leader that was just killed may hold its lock until the database notices: ask again for a moment.
    void (async () => {
      for (let i = 0; i < 10 && !(await cluster.lead().catch(() => false)); i++) {
        await new Promise((r) => setTimeout(r, 200));
      }
      await reconcileWhileLeading();
    })();
    const timers = [setInterval(reconcileWhileLeading, TICK_MS), setInterval(leaderOnly("idle sweep", sweep), TICK_MS)];
    let soon: NodeJS.Timeout | undefined;
    const unsubscribe = options.onSandboxLost?.(() => {
      soon ??= setTimeout(() => {
        soon = undefined;
        void reconcileWhileLeading();
      }, LOST_SANDBOX_DELAY_MS);
    });
    if (options.disk?.limitMb) {
      const watch = createDiskWatch({ ...deps, provisioner, limitMb: options.disk.limitMb });
      timers.push(setInterval(leaderOnly("disk watch", watch), options.disk.tickMs ?? TICK_MS));
    }
    void apps?.start(cluster);
    return () => {
      for (const t of timers) clearInterval(t);
      clearTimeout(soon);
      unsubscribe?.();
      apps?.stop();
    };
  }

  const { settings } = deps;
  const [apiPort] = hostPortsOf([settings.sandboxApiOrigin], settings.hostAlias);
  // Named by the API's port rather than by the process: the rules of a process killed before it could remove them
  // are replaced by the next one that serves on that port.
  const holder = { installationId: deps.installationId, holder: apiPort ? `port-${apiPort}` : deps.instanceId };

  return {
    provisioner,
    access: createSandboxAccess(deps.driver),
    /**
     * Closes the host to this installation's sandboxes but the API's port and a model gateway's on the host, while
     * this process runs (SandboxDriver.limitHost); whether it could.
     */
    limitHost: () =>
      deps.driver.limitHost({
        ...holder,
        ports: hostPortsOf([settings.sandboxApiOrigin, settings.llm.baseUrl], settings.hostAlias),
      }),
    /** At stop: this process's ports close with it. */
    releaseHost: () => deps.driver.unlimitHost(holder),
    startBackgroundWork,
    /** Deploys `[[apps]]` (undefined when the installation deploys none). */
    apps,
  };
}

export type Orchestrator = ReturnType<typeof createOrchestrator>;
