import { afterEach, describe, expect, it, vi } from "vitest";
import { AppSpec } from "../../protocol/manifest.ts";
import { createMemoryDriver } from "../../test/support/memory-driver.ts";
import {
  memoryApps,
  memoryCluster,
  memoryLog,
  memoryProject,
  memoryRepos,
  memorySecrets,
} from "../../test/support/memory-ports.ts";
import { waitFor } from "../../test/support/wait.ts";
import { type AppDeployer, createAppDeployer } from "./deployer.ts";
import { createLocalAppProvider } from "./local-provider.ts";

const LEAD_CHECK_MS = 20;
const until = <T>(what: string, fn: () => T | undefined | false) =>
  waitFor(what, async () => fn(), { timeoutMs: 5000, everyMs: 5 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const web = (over: Record<string, unknown> = {}) =>
  AppSpec.parse({ name: "web", port: 3000, command: "node server.js", health_path: "/health", ...over });

let deployers: AppDeployer[] = [];
afterEach(() => {
  for (const d of deployers) d.stop();
  deployers = [];
  vi.unstubAllGlobals();
});

function setup() {
  const mem = createMemoryDriver();
  vi.stubGlobal("fetch", mem.fetch);
  const apps = memoryApps();
  const repos = memoryRepos();
  const secrets = memorySecrets();
  const logs = memoryLog();
  const cluster = memoryCluster("me");
  const switched: string[] = [];
  const deployer = createAppDeployer({
    port: apps.port,
    provider: createLocalAppProvider({
      driver: mem.driver,
      limits: { memoryBytes: 1 << 30, nanoCpus: 1e9, pids: 512 },
    }),
    repos: repos.port,
    secrets: secrets.port,
    platformImage: async () => "svc-sandbox:test",
    installationId: "inst",
    healthTimeoutMs: 500,
    resyncMs: 60_000,
    leadCheckMs: LEAD_CHECK_MS,
    onSwitched: (projectId, app) => void switched.push(`${projectId}/${app}`),
    log: logs.log,
  });
  deployers.push(deployer);
  const project = memoryProject();
  /** A merge: the default branch moves and its manifest now defines `specs`. */
  const merge = (...specs: AppSpec[]) => {
    const commit = repos.advance(project);
    apps.setApps(project, commit, specs);
    return commit;
  };
  const start = () => deployer.start({ instanceId: "me", lead: cluster.lead, isAlive: cluster.isAlive });
  const live = () => apps.deploys().filter((d) => d.status === "live");
  return { mem, apps, repos, secrets, logs, cluster, switched, deployer, project, merge, start, live };
}

describe("app deployer", () => {
  it("deploys only while this process leads: from when it gains the lead, never after it lost it", async () => {
    const { mem, apps, cluster, deployer, project, merge, start, live, switched } = setup();
    cluster.state.leads = false;
    const first = merge(web());
    await start();
    await deployer.sync(project.id);
    await sleep(LEAD_CHECK_MS * 4);
    expect(apps.deploys()).toEqual([]);
    expect(mem.containers()).toEqual([]);

    cluster.state.leads = true;
    const [deploy] = await until("a live deploy", () => live().length === 1 && live());
    expect(deploy).toMatchObject({ app: "web", revision: first, trigger: "merge", instance_id: "me" });
    const container = mem.container(deploy!.container_id!)!;
    expect(container.running).toBe(true);
    expect(deploy!.endpoint).toBe((await mem.driver.inspect(container.id))!.endpoint);
    expect(switched).toEqual([`${project.id}/web`]);

    cluster.state.leads = false;
    await sleep(LEAD_CHECK_MS * 4);
    merge(web({ command: "node other.js" }));
    await deployer.sync(project.id);
    await sleep(LEAD_CHECK_MS * 4);
    expect(apps.deploys()).toHaveLength(1);
  });

  it("switches to a new deploy only once it answers its health check; a failed one leaves the previous serving", async () => {
    const { mem, apps, deployer, project, merge, start, live, switched, secrets } = setup();
    secrets.set(project.id, { API_KEY: "app-secret-value" });
    merge(web({ env: ["API_KEY"] }));
    await start();
    const [v1] = await until("v1 live", () => live().length === 1 && live());
    expect(mem.container(v1!.container_id!)!.env).toMatchObject({ API_KEY: "app-secret-value", PORT: "3000" });

    // v2 boots but does not answer yet: v1 keeps serving.
    mem.behaviour.appHealthy = false;
    merge(web({ env: ["API_KEY"], command: "node v2.js" }));
    await deployer.sync(project.id);
    const v2 = await until("v2 started", () =>
      apps.deploys().find((d) => d.id !== v1!.id && d.status === "starting" && d.container_id),
    );
    await sleep(100);
    expect(live().map((d) => d.id)).toEqual([v1!.id]);
    expect(mem.container(v1!.container_id!)?.running).toBe(true);
    mem.container(v2.container_id!)!.healthy = true;
    await until("v2 live", () => live().length === 1 && live()[0]!.id === v2.id);
    expect(apps.deploys().find((d) => d.id === v1!.id)!.status).toBe("superseded");
    expect(mem.container(v1!.container_id!)).toBeUndefined();
    expect(switched).toEqual([`${project.id}/web`, `${project.id}/web`]);

    // v3 never answers: it fails with the reason, its container goes, v2 still serves.
    merge(web({ env: ["API_KEY"], command: "node v3.js" }));
    await deployer.sync(project.id);
    const v3 = await until("v3 failed", () => apps.deploys().find((d) => d.status === "failed"));
    expect(v3.error).toContain("the app did not answer GET /health with 2xx");
    expect(v3.container_id && mem.container(v3.container_id)).toBeFalsy();
    expect(live().map((d) => d.id)).toEqual([v2.id]);
    expect(mem.container(v2.container_id!)?.running).toBe(true);

    // The failed key is not retried on every sync: only a new merge deploys again.
    await deployer.sync(project.id);
    expect(apps.deploys()).toHaveLength(3);
  });

  it("a deploy missing a secret fails naming it, and the app's removal from the manifest stops its live deploy", async () => {
    const { mem, apps, deployer, project, merge, start, live } = setup();
    merge(web());
    await start();
    const [v1] = await until("v1 live", () => live().length === 1 && live());
    merge(web({ env: ["DB_URL"] }));
    await deployer.sync(project.id);
    const failed = await until("failed", () => apps.deploys().find((d) => d.status === "failed"));
    expect(failed.error).toBe("missing project secret DB_URL (svc secrets set DB_URL=…)");
    expect(live().map((d) => d.id)).toEqual([v1!.id]);

    const commit = merge();
    await deployer.sync(project.id);
    await until("stopped", () => apps.deploys().find((d) => d.id === v1!.id)!.status === "stopped");
    expect(apps.deploys().find((d) => d.id === v1!.id)!.error).toBe(`removed from svc.toml at ${commit.slice(0, 7)}`);
    expect(mem.container(v1!.container_id!)).toBeUndefined();
  });

  it("on taking the lead: fails a dead process's interrupted deploys, leaves a live one's, re-creates a vanished one", async () => {
    const { mem, apps, repos, cluster, project, start, live } = setup();
    cluster.alive.add("other-live");
    // The manifest is unreadable just now: only the reconciling happens.
    apps.setApps(project, null, null);
    const spec = web();
    const owner = (deployId: string) => ({ installationId: "inst", projectId: project.id, app: "web", deployId });
    const mkApp = async (deployId: string) => {
      const id = await mem.driver.create({
        name: `app-${deployId}`,
        image: "img",
        env: {},
        port: 3000,
        owner: owner(deployId),
        limits: { memoryBytes: 1, nanoCpus: 1, pids: 1 },
      });
      await mem.driver.start(id);
      return id;
    };
    const interrupted = apps.addDeploy({
      project_id: project.id,
      app: "web",
      spec,
      status: "building",
      instance_id: "dead",
    });
    const interruptedContainer = await mkApp(interrupted.id);
    await apps.port.update(interrupted.id, { container_id: interruptedContainer });
    const othersBuild = apps.addDeploy({
      project_id: project.id,
      app: "other",
      spec: web({ name: "other" }),
      status: "starting",
      instance_id: "other-live",
    });
    const othersContainer = await mkApp(othersBuild.id);
    const orphan = await mkApp("no-such-deploy");
    // The installation's sandbox, beside its apps on the engine: no deploy owns it, and none may remove it.
    const sandbox = mem.adopt({
      owner: { installationId: "inst", projectId: project.id, sessionId: "a-session", sandboxId: "a-sandbox" },
    });
    const vanished = apps.addDeploy({
      project_id: project.id,
      app: "web",
      spec,
      status: "live",
      instance_id: "dead",
      container_id: "long-gone",
      revision: repos.tip(project)!,
    });

    await start();

    expect(apps.deploys().find((d) => d.id === interrupted.id)).toMatchObject({
      status: "failed",
      error: "the deploy was interrupted",
    });
    expect(mem.container(interruptedContainer)).toBeUndefined();
    expect(apps.deploys().find((d) => d.id === othersBuild.id)!.status).toBe("starting");
    expect(mem.container(othersContainer)).toBeDefined();
    expect(mem.container(orphan)).toBeUndefined();
    expect(mem.container(sandbox.id)?.running).toBe(true);
    expect(apps.deploys().find((d) => d.id === vanished.id)).toMatchObject({
      status: "stopped",
      error: "its container vanished: re-created by the next deploy",
    });
    const again = await until("the re-created deploy live", () => live().length === 1 && live()[0]);
    expect(again).toMatchObject({ app: "web", revision: vanished.revision, trigger: "reconcile" });
    expect(mem.container(again.container_id!)?.running).toBe(true);
  });
});
