import Docker from "dockerode";
import type { AppOptions, Services } from "../api/app.ts";
import type { ApiConfig } from "../api/config.ts";
import type { Cluster } from "./cluster.ts";
import { createIdleSweeper } from "./idle-sweeper.ts";
import { createReconciler } from "./reconciler.ts";
import { createDockerDriver } from "./sandbox/docker-driver.ts";
import { createSessionStore } from "./sessions/store.ts";

const LOCAL_BASE_IMAGE = "svc-debian:bookworm";
const PUBLIC_BASE_IMAGE = "debian:bookworm-slim";
const TICK_MS = 30_000;

/**
 * The Docker orchestrator when an engine answers, else undefined (the API then serves everything but sessions).
 * The base image defaults to the locally built one when present (no registry here), else the public image.
 */
export async function dockerOrchestrator(config: ApiConfig, root: string): Promise<AppOptions["orchestrator"]> {
  if (!config.orchestrator.enabled) return undefined;
  const docker = new Docker();
  try {
    await docker.ping();
  } catch {
    return undefined;
  }
  const hasLocalBase = await docker
    .getImage(LOCAL_BASE_IMAGE)
    .inspect()
    .then(() => true)
    .catch(() => false);
  const o = config.orchestrator;
  return {
    driver: createDockerDriver({ docker, servicePort: 8000 }),
    root,
    baseImage: o.baseImage ?? (hasLocalBase ? LOCAL_BASE_IMAGE : PUBLIC_BASE_IMAGE),
    settings: {
      sessionCap: o.sessionCap,
      sandboxApiOrigin: o.sandboxApiOrigin,
      hostAlias: "host.docker.internal",
      provisionTimeoutMs: o.provisionTimeoutMs,
      limits: o.limits,
      llm: o.llm,
      defaultAgent: "build",
    },
  };
}

/**
 * Reconciles at start and then, with the idle sweep, on a timer, while this process leads the cluster (the
 * others keep asking, so one takes over within a tick when the leader dies). Returns the function that stops.
 */
export function startBackgroundWork(
  services: Services,
  orchestrator: NonNullable<AppOptions["orchestrator"]>,
  options: { idleMs: number; cluster: Cluster; log: (msg: string, extra?: Record<string, unknown>) => void },
): () => void {
  const sessions = services.sessions!;
  const store = createSessionStore(services.sql);
  const reconcile = createReconciler({
    driver: orchestrator.driver,
    store,
    sessions,
    installationId: services.installationId,
    isAlive: options.cluster.isAlive,
    log: options.log,
  });
  const sweep = createIdleSweeper({ store, sessions, idleMs: options.idleMs, log: options.log });
  const whileLeading = (name: string, fn: () => Promise<unknown>) => async () => {
    try {
      if (await options.cluster.lead()) await fn();
    } catch (err) {
      options.log(`${name} failed`, { error: (err as Error).message });
    }
  };
  // A leader that was just killed may hold its lock until the database notices: ask again for a moment.
  void (async () => {
    for (let i = 0; i < 10 && !(await options.cluster.lead().catch(() => false)); i++) {
      await new Promise((r) => setTimeout(r, 200));
    }
    await whileLeading("reconcile", reconcile)();
  })();
  const timers = [
    setInterval(whileLeading("reconcile", reconcile), TICK_MS),
    setInterval(whileLeading("idle sweep", sweep), TICK_MS),
  ];
  return () => {
    for (const t of timers) clearInterval(t);
  };
}
