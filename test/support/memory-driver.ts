import { randomUUID } from "node:crypto";
import { OrchestratorError } from "../../orchestrator/errors.ts";
import type {
  AppContainerSpec,
  AppOwner,
  ContainerInfo,
  HostAccess,
  ImageBuild,
  SandboxDriver,
  SandboxEgress,
  SandboxExec,
  SandboxLogLine,
  SandboxOwner,
  SandboxSpec,
} from "../../orchestrator/sandbox/driver.ts";
import type { DaemonHealth } from "../../protocol/daemon.ts";
import { SandboxEnv } from "../../protocol/env.ts";

/**
 * The sandbox backend in memory: containers are records, each sandbox's daemon a small state machine that answers
 * the calls the orchestrator makes to it (GET /svc/health, POST /svc/pool/seed, POST /svc/claim) through `fetch`,
 * which a test installs in place of the global one (`vi.stubGlobal("fetch", driver.fetch)`). Nothing leaves the
 * process: a URL that is no running container's endpoint fails as an unreachable host does.
 */

export type PoolState = NonNullable<DaemonHealth["pool"]>;
export type RepoState = DaemonHealth["repo"]["state"];

/** What a sandbox's daemon says and does; a test may change any of it while the sandbox runs. */
export type MemoryDaemon = {
  serviceKey: string;
  /** A warm-pool sandbox (SVC_POOLED=1): its state; undefined in a session's own sandbox. */
  pool: PoolState | undefined;
  repo: { state: RepoState; commit: string | null; error: string | null };
  lastActivityAt: string;
  busy: boolean;
  /** False: the container runs but its daemon does not answer (hung, or still booting). */
  answering: boolean;
  /** What POST /svc/pool/seed received: the branch and commit of the bundle, and when the runtime boots. */
  seeded?: { ref: string; commit: string; runtime: string };
  /** The env a claim added (CLAIMED_ENV). */
  claimedEnv?: Record<string, string>;
  healthChecks: number;
};

export type MemoryContainer = {
  id: string;
  name: string;
  kind: "sandbox" | "app";
  image: string;
  env: Record<string, string>;
  running: boolean;
  /** Set once `start` ran: a stopped container keeps it, as Docker keeps an exited one's address-less record. */
  started: boolean;
  owner: Partial<SandboxOwner> & Partial<AppOwner>;
  pool: string | null;
  /** A pooled sandbox's boot yields its CPU to others (SandboxSpec.pool) until `booted`. */
  yielding: boolean;
  egress: SandboxEgress;
  /** The daemon's (sandbox) or the app's port. */
  port: number;
  /** The app's health path answers 2xx (apps only). */
  healthy: boolean;
  daemon: MemoryDaemon | undefined;
  logs: SandboxLogLine[];
  diskBytes: number;
  createdAt: number;
};

/** How new containers behave; a test changes these before the calls it cares about. */
export type MemoryBehaviour = {
  /** A pooled sandbox's state once seeded: `warming` stays there until the test says otherwise (`setPool`). */
  afterSeed: "ready" | "warming" | "failed";
  /** A session sandbox's clone at start: `cloning` stays there until the test says otherwise (`setRepo`). */
  clone: "cloned" | "cloning" | "failed";
  /** Whether a new app container answers its health check. */
  appHealthy: boolean;
};

type Op = keyof SandboxDriver;

const SANDBOX_DOMAIN = "sandbox.memory.invalid";
const APP_DOMAIN = "app.memory.invalid";

/** What an unreachable host gives `fetch`: a TypeError, as undici's "fetch failed". */
const unreachable = (url: string) =>
  Object.assign(new TypeError("fetch failed"), { cause: new Error(`${url}: ECONNREFUSED`) });

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

const daemonError = (status: number, code: string, message: string) => json(status, { error: { code, message } });

async function bodyBytes(body: unknown): Promise<Buffer> {
  if (body === undefined || body === null) return Buffer.alloc(0);
  if (typeof body === "string") return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(new Uint8Array(body));
  return Buffer.from(await new Response(body as BodyInit).arrayBuffer());
}

function headerOf(init: RequestInit | undefined, name: string): string | undefined {
  const headers = new Headers(init?.headers);
  return headers.get(name) ?? undefined;
}

export function createMemoryDriver() {
  const containers = new Map<string, MemoryContainer>();
  const removed: MemoryContainer[] = [];
  const images = new Set<string>();
  const builds: ImageBuild[] = [];
  const hostHolders = new Map<string, Set<string>>();
  const failures = new Map<Op, ((...args: unknown[]) => Error | undefined)[]>();
  const behaviour: MemoryBehaviour = { afterSeed: "ready", clone: "cloned", appHealthy: true };
  /** The most pooled sandboxes of each project that were booting (created, not yet ready) at one time. */
  const peakBooting = new Map<string, number>();
  const calls: { op: Op; id?: string }[] = [];

  const get = (id: string, op: string) => {
    const c = containers.get(id);
    if (!c)
      throw new OrchestratorError(
        "SANDBOX_BACKEND_FAILED",
        `the container engine failed to ${op}: no such container: ${id}`,
      );
    return c;
  };

  /** A failure queued by `failNext`, if one is due for this call. */
  function injected(op: Op, args: unknown[]): void {
    calls.push({ op, id: typeof args[0] === "string" ? args[0] : undefined });
    const queue = failures.get(op);
    if (!queue?.length) return;
    const err = queue.shift()!(...args);
    if (err) throw err;
  }

  const endpointOf = (c: MemoryContainer) =>
    c.running ? `http://${c.id.slice(0, 12)}.${c.kind === "app" ? APP_DOMAIN : SANDBOX_DOMAIN}:${c.port}` : null;

  const info = (c: MemoryContainer): ContainerInfo =>
    c.kind === "app"
      ? { kind: "app", id: c.id, running: c.running, owner: { ...c.owner }, endpoint: endpointOf(c) }
      : {
          kind: "sandbox",
          id: c.id,
          name: c.name,
          running: c.running,
          owner: { ...c.owner },
          endpoint: endpointOf(c),
          pool: c.pool,
        };

  const booting = (c: MemoryContainer) =>
    c.pool !== null && c.daemon?.pool !== "ready" && c.daemon?.pool !== "claimed" && c.daemon?.pool !== "failed";

  function add(
    c: Omit<MemoryContainer, "id" | "createdAt" | "started" | "running" | "logs" | "diskBytes" | "yielding">,
  ): string {
    if ([...containers.values()].some((o) => o.name === c.name))
      throw new OrchestratorError(
        "SANDBOX_BACKEND_FAILED",
        `the container engine failed to create: Conflict. The container name "/${c.name}" is already in use`,
      );
    const id = randomUUID().replace(/-/g, "") + randomUUID().replace(/-/g, "");
    const container: MemoryContainer = {
      ...c,
      id,
      createdAt: Date.now(),
      started: false,
      running: false,
      yielding: c.pool !== null,
      logs: [],
      diskBytes: 0,
    };
    containers.set(id, container);
    const projectId = container.owner.projectId;
    if (container.pool !== null && projectId) {
      const now = [...containers.values()].filter((o) => o.owner.projectId === projectId && booting(o)).length;
      peakBooting.set(projectId, Math.max(peakBooting.get(projectId) ?? 0, now));
    }
    return id;
  }

  function health(c: MemoryContainer): DaemonHealth {
    const d = c.daemon!;
    return {
      status: "ok",
      version: "memory",
      uptime_s: Math.round((Date.now() - c.createdAt) / 1000),
      agent: { state: "running", pid: 1, restarts: 0, error: null },
      repo: {
        state: d.repo.state,
        url: c.env[SandboxEnv.repoUrl] ?? null,
        branch: c.env[SandboxEnv.branchName] ?? null,
        commit: d.repo.commit,
        error: d.repo.error,
      },
      ...(d.pool ? { pool: d.pool } : {}),
      last_activity_at: d.lastActivityAt,
      busy: d.busy,
    };
  }

  /** A git bundle's first ref line: `<sha> refs/heads/<branch>`. */
  function bundleRef(bytes: Buffer): { ref: string; commit: string } | undefined {
    const text = bytes.subarray(0, 4096).toString("latin1");
    if (!/^# v[23] git bundle\n/.test(text)) return undefined;
    const line = /^([0-9a-f]{40,64}) (refs\/\S+)$/m.exec(text);
    return line ? { commit: line[1]!, ref: line[2]! } : undefined;
  }

  async function daemonAnswer(c: MemoryContainer, url: URL, init: RequestInit | undefined): Promise<Response> {
    const d = c.daemon!;
    const method = (init?.method ?? "GET").toUpperCase();
    if (url.pathname === "/svc/health") {
      d.healthChecks += 1;
      return json(200, health(c));
    }
    if (method !== "POST") return daemonError(405, "METHOD_NOT_ALLOWED", "use POST");
    if (headerOf(init, "authorization") !== `Bearer ${d.serviceKey}`)
      return daemonError(401, "UNAUTHENTICATED", "the sandbox service key is required");
    if (url.pathname === "/svc/pool/seed") {
      if (d.pool !== "seeding")
        return daemonError(409, "CONFLICT", `this sandbox is ${d.pool ?? "not pooled"}, not waiting for a seed`);
      const seeded = bundleRef(await bodyBytes(init?.body));
      if (!seeded) {
        d.pool = "failed";
        d.repo = { state: "failed", commit: null, error: "not a git bundle" };
        return daemonError(409, "CONFLICT", "could not seed the workspace: not a git bundle");
      }
      const runtime = url.searchParams.get("runtime") ?? "now";
      d.seeded = { ...seeded, runtime };
      d.repo = { state: "cloned", commit: seeded.commit, error: null };
      // A runtime booted at the claim has nothing to warm: ready at once, unless the test makes sandboxes fail.
      d.pool = runtime === "on-claim" && behaviour.afterSeed !== "failed" ? "ready" : behaviour.afterSeed;
      return json(200, { commit: seeded.commit });
    }
    if (url.pathname === "/svc/claim") {
      if (d.pool !== "ready")
        return daemonError(409, "CONFLICT", `this sandbox is ${d.pool ?? "not pooled"}, not ready to claim`);
      const body = JSON.parse((await bodyBytes(init?.body)).toString() || "{}") as { env?: Record<string, string> };
      d.pool = "claimed";
      d.claimedEnv = body.env ?? {};
      return json(200, { claimed: true });
    }
    return daemonError(404, "NOT_FOUND", `no control route ${url.pathname}`);
  }

  /** `fetch` for the sandboxes' daemons and the apps in this driver; anything else is unreachable. */
  async function memoryFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (init?.signal?.aborted) throw init.signal.reason;
    await Promise.resolve();
    const c = [...containers.values()].find((o) => o.running && endpointOf(o) === url.origin);
    if (!c) throw unreachable(url.href);
    if (c.kind === "app") {
      if (!c.healthy) return new Response("starting", { status: 503 });
      return new Response("ok", { status: 200 });
    }
    if (!c.daemon!.answering) throw unreachable(url.href);
    return daemonAnswer(c, url, init);
  }

  const driver: SandboxDriver = {
    async create(spec: SandboxSpec | AppContainerSpec) {
      injected("create", [spec]);
      if (!("servicePort" in spec)) {
        return add({
          name: spec.name,
          kind: "app",
          image: spec.image,
          env: { ...spec.env },
          owner: { ...spec.owner },
          pool: null,
          egress: "open",
          port: spec.port,
          healthy: behaviour.appHealthy,
          daemon: undefined,
        });
      }
      const pooled = spec.env[SandboxEnv.pooled] === "1";
      const autoClone = spec.env[SandboxEnv.autoClone] === "1";
      const serviceKey = spec.env[SandboxEnv.serviceKey];
      if (!serviceKey) throw new Error("memory driver: a sandbox without SVC_TOKEN");
      return add({
        name: spec.name,
        kind: "sandbox",
        image: spec.image,
        env: { ...spec.env },
        owner: { ...spec.owner },
        pool: spec.pool ?? null,
        egress: spec.egress ?? "open",
        port: spec.servicePort,
        healthy: false,
        daemon: {
          serviceKey,
          pool: pooled ? "seeding" : undefined,
          repo: { state: pooled || autoClone ? "cloning" : "disabled", commit: null, error: null },
          lastActivityAt: new Date().toISOString(),
          busy: false,
          answering: true,
          healthChecks: 0,
        },
      });
    },

    async start(id: string) {
      injected("start", [id]);
      const c = get(id, "start");
      c.running = true;
      c.started = true;
      const d = c.daemon;
      if (d && d.pool === undefined && d.repo.state === "cloning") {
        d.repo =
          behaviour.clone === "failed"
            ? { state: "failed", commit: null, error: "could not read from remote repository" }
            : { state: behaviour.clone, commit: null, error: null };
      }
      return info(c);
    },

    async booted(id: string) {
      injected("booted", [id]);
      get(id, "update").yielding = false;
    },

    async remove(id: string) {
      injected("remove", [id]);
      const c = containers.get(id);
      if (!c) return;
      c.running = false;
      containers.delete(id);
      removed.push(c);
    },

    async inspect(id: string) {
      injected("inspect", [id]);
      const c = containers.get(id);
      return c && info(c);
    },

    async list(installationId: string) {
      injected("list", [installationId]);
      return [...containers.values()].filter((c) => c.owner.installationId === installationId).map(info);
    },

    async networks() {
      return [{ hostAddress: "10.0.0.1", subnet: "10.0.0.0/24" }];
    },

    async limitHost(access: HostAccess) {
      injected("limitHost", [access]);
      const holders = hostHolders.get(access.installationId) ?? new Set<string>();
      holders.add(access.holder);
      hostHolders.set(access.installationId, holders);
      return { enforced: true as const };
    },

    async unlimitHost(access) {
      hostHolders.get(access.installationId)?.delete(access.holder);
    },

    unlistedEgress: async () => "open" as const,

    async diskUsage(installationId: string) {
      return [...containers.values()]
        .filter((c) => c.kind === "sandbox" && c.running && c.owner.installationId === installationId)
        .map((c) => ({ sandboxId: c.owner.sandboxId ?? "", bytes: c.diskBytes }));
    },

    async imageExists(tag: string) {
      return images.has(tag);
    },

    async buildImage(build: ImageBuild, onStep?: (step: string) => void) {
      injected("buildImage", [build]);
      onStep?.("1/1 FROM base");
      builds.push(build);
      images.add(build.tag);
      return "Step 1/1 : FROM base\n";
    },

    async logs(id: string) {
      injected("logs", [id]);
      const lines = [...get(id, "logs").logs];
      return (async function* () {
        yield* lines;
      })();
    },

    async exec(id: string): Promise<SandboxExec> {
      injected("exec", [id]);
      get(id, "exec");
      return {
        stdin: null,
        output: (async function* () {})(),
        resize: async () => {},
        exitCode: async () => 0,
        close: () => {},
      };
    },

    async environment(id: string) {
      injected("environment", [id]);
      return { ...get(id, "environment").env };
    },
  };

  return {
    driver,
    /** `fetch` that reaches this driver's sandboxes and apps, and nothing else. */
    fetch: memoryFetch as typeof fetch,
    behaviour,
    /** The image every build starts from exists from the start. */
    addImage: (tag: string) => void images.add(tag),
    builds,
    /** Driver calls in order (op and the container id when the first argument was one). */
    calls,
    /** Containers that exist now (running or not). */
    containers: () => [...containers.values()],
    container: (id: string) => containers.get(id),
    /** Containers removed so far, in order. */
    removed: () => [...removed],
    /** The container of a sandbox, by its sandbox or session id. */
    sandboxOf: (owner: { sandboxId?: string; sessionId?: string }) =>
      [...containers.values()].find(
        (c) =>
          c.kind === "sandbox" &&
          (owner.sandboxId === undefined || c.owner.sandboxId === owner.sandboxId) &&
          (owner.sessionId === undefined || c.owner.sessionId === owner.sessionId),
      ),
    /** Pooled sandboxes of a project that exist now, and in which pool state. */
    pooled: (projectId: string, state?: PoolState) =>
      [...containers.values()].filter(
        (c) => c.pool !== null && c.owner.projectId === projectId && (!state || c.daemon?.pool === state),
      ),
    /** The most pooled sandboxes of the project that were booting at once. */
    peakBooting: (projectId: string) => peakBooting.get(projectId) ?? 0,
    /** The container dies (the engine restarted, the kernel killed it): it stops running and answering. */
    kill(id: string): void {
      const c = get(id, "kill");
      c.running = false;
    },
    /** A container the engine has but no record of ours made (another process's, or left over). */
    adopt(
      spec: Omit<Partial<SandboxSpec>, "owner"> & { owner: Partial<SandboxOwner>; running?: boolean },
    ): MemoryContainer {
      const id = add({
        name: spec.name ?? `svc-adopted-${randomUUID().slice(0, 8)}`,
        kind: "sandbox",
        image: spec.image ?? "svc-sandbox:test",
        env: { ...(spec.env ?? {}) },
        owner: { ...spec.owner },
        pool: spec.pool ?? null,
        egress: spec.egress ?? "open",
        port: spec.servicePort ?? 8000,
        healthy: false,
        daemon: {
          serviceKey: spec.env?.[SandboxEnv.serviceKey] ?? "unknown",
          pool: spec.pool ? "ready" : undefined,
          repo: { state: "cloned", commit: null, error: null },
          lastActivityAt: new Date().toISOString(),
          busy: false,
          answering: true,
          healthChecks: 0,
        },
      });
      const c = containers.get(id)!;
      c.running = spec.running ?? true;
      c.started = true;
      return c;
    },
    /** The next call of `op` fails with what `error` returns for its arguments (undefined: it runs normally). */
    failNext(op: Op, error: Error | ((...args: any[]) => Error | undefined)): void {
      const queue = failures.get(op) ?? [];
      queue.push(typeof error === "function" ? error : () => error);
      failures.set(op, queue);
    },
    hostHolders: (installationId: string) => [...(hostHolders.get(installationId) ?? [])],
  };
}

export type MemoryDriver = ReturnType<typeof createMemoryDriver>;
