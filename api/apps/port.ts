import type { AppsPort } from "../../orchestrator/ports.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import type { ProjectStore } from "../projects/store.ts";
import type { TriggerStore } from "../triggers/store.ts";
import type { AppDeployStore } from "./store.ts";

/** The app deployer's port: manifests on default branches, the deploy history, and which branches moved. */
export function createAppsPort(deps: {
  store: AppDeployStore;
  projects: ProjectStore;
  manifests: ManifestReader;
  triggers: TriggerStore;
}): AppsPort {
  const { store, projects, manifests } = deps;
  return {
    projectIds: () => deps.triggers.projectIds(),
    async project(projectId) {
      const project = await projects.byId(projectId);
      if (!project) return undefined;
      const read = await manifests.read(project).catch(() => undefined);
      return { project, commit: read?.commit ?? null, apps: read ? read.manifest.apps : null };
    },
    // The same signal the trigger scheduler follows: a merge, or a push or fetch that moved a manifest record.
    movedSince: (cursor) => deps.triggers.movedSince(cursor),
    insert: (d) => store.insert(d),
    update: (id, fields) => store.update(id, fields),
    newest: (projectId, app) => store.newest(projectId, app),
    active: (projectId) => store.active(projectId),
    previousLive: (projectId, app, before, key) => store.previousLive(projectId, app, before, key),
  };
}
