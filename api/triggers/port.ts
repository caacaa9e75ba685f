import type { TriggerPort } from "../../orchestrator/ports.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import type { ProjectStore } from "../projects/store.ts";
import type { TriggerService } from "./service.ts";
import type { TriggerStore } from "./store.ts";

/** The trigger scheduler's port: manifests, claims and firings through the trigger service. */
export function createTriggerPort(deps: {
  store: TriggerStore;
  projects: ProjectStore;
  manifests: ManifestReader;
  triggers: TriggerService;
}): TriggerPort {
  const { store, projects, manifests, triggers } = deps;
  const port: TriggerPort = {
    async projects() {
      const ids = await store.projectIds();
      const all = await Promise.all(ids.map((id) => port.project(id)));
      return all.filter((p) => p !== undefined);
    },
    async project(projectId) {
      const project = await projects.byId(projectId);
      if (!project) return undefined;
      const read = await manifests.read(project).catch(() => undefined);
      return { projectId, triggers: read ? read.manifest.triggers : null };
    },
    scheduled: (projectId, slug, schedule) => store.scheduled(projectId, slug, schedule),
    movedSince: (cursor) => store.movedSince(cursor),
    claim: (projectId, slug, at) => triggers.claim(projectId, slug, at),
    async fire(projectId, trigger, at) {
      const project = await projects.byId(projectId);
      if (!project) return { error: "the project no longer exists" };
      const out = await triggers.startClaimed(project, trigger, at);
      return "error" in out ? { error: out.error.message } : { sessionId: out.session.session_id };
    },
  };
  return port;
}
