import type { AppDeployer } from "../../orchestrator/apps/deployer.ts";
import type { AppDeployRecord } from "../../orchestrator/ports.ts";
import type { SandboxLogLine } from "../../orchestrator/sandbox/driver.ts";
import type { App, AppDeploy, AppDetail, AppLink, AppList, AppStatus } from "../../protocol/app.ts";
import type { AppSpec } from "../../protocol/manifest.ts";
import type { Project } from "../../protocol/project.ts";
import { apiError } from "../errors.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import { APP_LINK_TTL_S, APP_PARAM, signAppGrant } from "./app-grant.ts";
import { type AppDeployStore, toAppDeploy } from "./store.ts";

export type AppServiceDeps = {
  store: AppDeployStore;
  manifests: ManifestReader;
  /** Undefined when apps are not deployed here (SVC_APP_PROVIDER=none, or no container engine). */
  deployer: () => AppDeployer | undefined;
  publicUrl: () => string;
  previewDomain: () => string | undefined;
  /** Signs app links (app-grant.ts); undefined when the server has no secrets key. */
  grantKey: string | undefined;
};

/** `<name>--<project>.<preview domain>`: the app at the root of its own origin. */
export function appOrigin(deps: Pick<AppServiceDeps, "publicUrl" | "previewDomain">, projectId: string, app: string) {
  const domain = deps.previewDomain();
  if (!domain) return null;
  const api = new URL(deps.publicUrl());
  return `${api.protocol}//${app}--${projectId}.${domain}${api.port ? `:${api.port}` : ""}`;
}

function statusOf(
  enabled: boolean,
  inManifest: boolean,
  newest: AppDeployRecord | undefined,
  live: boolean,
): AppStatus {
  if (!enabled) return "disabled";
  if (!newest) return inManifest ? "pending" : "removed";
  if (newest.status === "building" || newest.status === "starting") return "deploying";
  if (live) return "live";
  if (!inManifest) return "removed";
  return newest.status === "failed" ? "failed" : "stopped";
}

/** The `[[apps]]` of a project's default branch with their deploys (GET/POST /v1/projects/{p}/apps…). */
export function createAppService(deps: AppServiceDeps) {
  const { store } = deps;

  function deployerOf(): AppDeployer {
    const deployer = deps.deployer();
    if (!deployer) {
      throw apiError(
        "APPS_DISABLED",
        "apps are not deployed on this server: SVC_APP_PROVIDER is none (svc self-host env set SVC_APP_PROVIDER=local)",
      );
    }
    return deployer;
  }

  async function describe(project: Project): Promise<{ apps: (App & { spec: AppSpec | null })[]; list: AppList }> {
    const read = await deps.manifests.read(project);
    const enabled = Boolean(deps.deployer());
    const newest = new Map((await store.newestPerApp(project.id)).map((d) => [d.app, d]));
    const live = new Map(
      (await store.active(project.id)).filter((d) => d.status === "live").map((d) => [d.app, d] as const),
    );
    const specs = new Map(read.manifest.apps.map((s) => [s.name, s]));
    const names = [...specs.keys(), ...[...newest.keys()].filter((n) => !specs.has(n))];
    const apps = names.map((name) => {
      const last = newest.get(name);
      const serving = live.get(name);
      return {
        name,
        url: appOrigin(deps, project.id, name),
        status: statusOf(enabled, specs.has(name), last, Boolean(serving)),
        live_revision: serving?.revision ?? null,
        key: serving?.key ?? null,
        last_deploy: last ? toAppDeploy(last) : null,
        spec: specs.get(name) ?? null,
      };
    });
    return {
      apps,
      list: { apps: apps.map(({ spec: _spec, ...app }) => app), manifest_error: read.error },
    };
  }

  async function find(project: Project, name: string) {
    const app = (await describe(project)).apps.find((a) => a.name === name);
    if (!app) throw apiError("APP_NOT_FOUND", `no app '${name}' in svc.toml on ${project.default_branch}`);
    return app;
  }

  return {
    list: async (project: Project): Promise<AppList> => (await describe(project)).list,

    async get(project: Project, name: string): Promise<AppDetail> {
      const app = await find(project, name);
      return { ...app, deploys: (await store.history(project.id, name)).map(toAppDeploy) };
    },

    async deploys(project: Project, name: string): Promise<AppDeploy[]> {
      await find(project, name);
      return (await store.history(project.id, name)).map(toAppDeploy);
    },

    async redeploy(project: Project, name: string): Promise<AppDeploy> {
      const deployer = deployerOf();
      const app = await find(project, name);
      if (!app.spec)
        throw apiError("APP_NOT_FOUND", `app '${name}' is no longer in svc.toml on ${project.default_branch}`);
      const d = await deployer.redeploy(project.id, name);
      if (!d) throw apiError("APP_NOT_FOUND", `no app '${name}' in svc.toml on ${project.default_branch}`);
      return toAppDeploy(d);
    },

    async rollback(project: Project, name: string): Promise<AppDeploy> {
      const deployer = deployerOf();
      await find(project, name);
      const d = await deployer.rollback(project.id, name);
      if (!d) {
        throw apiError(
          "APP_NO_PREVIOUS_REVISION",
          `app '${name}' has no earlier live revision to roll back to (svc apps info ${name} shows its history)`,
        );
      }
      return toAppDeploy(d);
    },

    /** `svc apps open`: the app's URL with a grant a browser keeps in a cookie of the app's origin. */
    async link(project: Project, name: string, userId: string): Promise<AppLink> {
      const app = await find(project, name);
      if (!app.url) throw apiError("NOT_CONFIGURED", "apps have no URL on this server: it has no preview domain");
      if (!deps.grantKey) throw apiError("NOT_CONFIGURED", "app links need the server's secrets key (SVC_SECRETS_KEY)");
      const exp = Math.floor(Date.now() / 1000) + APP_LINK_TTL_S;
      const grant = signAppGrant(deps.grantKey, { user_id: userId, project_id: project.id, app: name, exp });
      return { url: `${app.url}/?${APP_PARAM}=${grant}`, expires_at: new Date(exp * 1000).toISOString() };
    },

    /** The live deploy's output; 409 when nothing serves. */
    async logs(
      project: Project,
      name: string,
      options: { follow: boolean; tail?: number; signal: AbortSignal },
    ): Promise<AsyncIterable<SandboxLogLine>> {
      const deployer = deployerOf();
      await find(project, name);
      const live = (await store.active(project.id)).find((d) => d.app === name && d.status === "live");
      if (!live?.container_id) throw apiError("CONFLICT", `app '${name}' has no live deploy`);
      return deployer.logs(live.container_id, { ...options, secretNames: live.spec.env });
    },
  };
}

export type AppService = ReturnType<typeof createAppService>;
