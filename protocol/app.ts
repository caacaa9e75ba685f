import { z } from "zod";
import { AppName, AppSpec, ManifestError } from "./manifest.ts";

/** A deploy's life: built, started, answering its health check (`live`), then replaced or stopped. */
export const DeployStatus = z.enum(["building", "starting", "live", "failed", "superseded", "stopped"]);
export type DeployStatus = z.infer<typeof DeployStatus>;

/** What started a deploy. */
export const DeployTrigger = z.enum(["merge", "redeploy", "rollback", "reconcile"]);
export type DeployTrigger = z.infer<typeof DeployTrigger>;

/** One deploy of an app (GET …/apps/{name}/deploys, newest first). */
export const AppDeploy = z.object({
  id: z.string(),
  app: z.string(),
  /** The commit deployed. */
  revision: z.string(),
  /** Hash of the app's build inputs at that commit (entry, context tree, Dockerfile, platform image). */
  key: z.string(),
  status: DeployStatus,
  trigger: DeployTrigger,
  /** The deploy this one rolled back from. */
  rollback_of: z.string().nullable(),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  error: z.string().nullable(),
});
export type AppDeploy = z.infer<typeof AppDeploy>;

/** `disabled`: SVC_APP_PROVIDER=none; `removed`: gone from svc.toml but still known from its history. */
export const AppStatus = z.enum(["disabled", "pending", "deploying", "live", "failed", "stopped", "removed"]);
export type AppStatus = z.infer<typeof AppStatus>;

/** An app of the default branch's manifest with its deploy state (GET …/apps). */
export const App = z.object({
  name: z.string(),
  /** Where the app answers (its own origin), null when the server has no preview domain. */
  url: z.string().nullable(),
  status: AppStatus,
  /** The commit serving now. */
  live_revision: z.string().nullable(),
  key: z.string().nullable(),
  last_deploy: AppDeploy.nullable(),
});
export type App = z.infer<typeof App>;

export const AppList = z.object({ apps: z.array(App), manifest_error: ManifestError.nullable() });
export type AppList = z.infer<typeof AppList>;

/** GET …/apps/{name}: the app, its manifest entry (null once removed) and its history. */
export const AppDetail = App.extend({ spec: AppSpec.nullable(), deploys: z.array(AppDeploy) });
export type AppDetail = z.infer<typeof AppDetail>;

/** POST …/apps/{name}/link: the app's URL signed for a browser (no Authorization header needed). */
export const AppLink = z.object({ url: z.string(), expires_at: z.string() });
export type AppLink = z.infer<typeof AppLink>;

export const AppDeployList = z.object({ deploys: z.array(AppDeploy) });

export const AppParams = z.object({ projectId: z.string(), name: AppName });
