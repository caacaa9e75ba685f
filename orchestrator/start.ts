import Docker from "dockerode";
import type { AppOptions, Services } from "../api/app.ts";
import type { ApiConfig } from "../api/config.ts";
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

/** Reconciles at start and then, with the idle sweep, on a timer. Returns the function that stops both. */
export function startBackgroundWork(
  services: Services,
  orchestrator: NonNullable<AppOptions["orchestrator"]>,
  options: { idleMs: number; log: (msg: string, extra?: Record<string, unknown>) => void },
): () => void {
  const sessions = services.sessions!;
  const store = createSessionStore(services.sql);
  const reconcile = createReconciler({
    driver: orchestrator.driver,
    store,
    sessions,
    installationId: services.installationId,
    log: options.log,
  });
  const sweep = createIdleSweeper({ store, sessions, idleMs: options.idleMs, log: options.log });
  const run = (name: string, fn: () => Promise<unknown>) => () =>
    fn().catch((err) => options.log(`${name} failed`, { error: (err as Error).message }));
  void run("reconcile", reconcile)();
  const timers = [setInterval(run("reconcile", reconcile), TICK_MS), setInterval(run("idle sweep", sweep), TICK_MS)];
  return () => {
    for (const t of timers) clearInterval(t);
  };
}
