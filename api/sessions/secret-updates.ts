import type { SecretsPort } from "../../orchestrator/ports.ts";
import type { EnvBody } from "../../protocol/daemon.ts";
import type { Project } from "../../protocol/project.ts";
import type { Events } from "../events.ts";
import type { ProjectStore } from "../projects/store.ts";
import type { SessionService } from "./service.ts";
import type { SessionStore } from "./store.ts";

type Log = (msg: string, extra?: Record<string, unknown>) => void;

const PUSH_TIMEOUT_MS = 10_000;

/**
 * Sends a project's secrets, as a sandbox gets them, to every running session's sandbox (its daemon's
 * POST /svc/env): the agent's next shell command has the new values, and not the names unset. Any API process
 * reaches any sandbox, so the process that took the change does it for the whole cluster. A sandbox that cannot be
 * reached is logged and left: it is stopped or replaced, and its next start reads the secrets again.
 */
async function pushSecretChanges(
  deps: { sessions: SessionService; store: SessionStore; log: Log },
  project: Project,
  env: EnvBody,
): Promise<void> {
  const running = (await deps.store.list(project.id)).filter((s) => s.status === "running");
  await Promise.all(
    running.map(async ({ session_id }) => {
      try {
        const target = await deps.sessions.sandboxTarget(project, session_id);
        const res = await fetch(`${target.url}/svc/env`, {
          method: "POST",
          headers: { authorization: `Bearer ${target.serviceKey}`, "content-type": "application/json" },
          body: JSON.stringify(env),
          signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
        });
        await res.arrayBuffer();
        if (!res.ok) throw new Error(`the sandbox answered ${res.status}`);
      } catch (err) {
        deps.log("could not send changed secrets to a running session", {
          session: session_id,
          error: (err as Error).message,
        });
      }
    }),
  );
}

/** On every `secrets.changed`: the project's secrets as its sandboxes get them, sent to its running sessions. */
export function followSecretChanges(deps: {
  events: Events;
  projects: ProjectStore;
  /** The project's secrets as a sandbox gets them (never the remote's credential). */
  secrets: Pick<SecretsPort, "values">;
  sessions: SessionService;
  store: SessionStore;
  log: Log;
}): void {
  deps.events.on("secrets.changed", async ({ projectId, unset }) => {
    const project = await deps.projects.byId(projectId);
    if (!project) return;
    const { values } = await deps.secrets.values(projectId);
    await pushSecretChanges(deps, project, { set: values, unset: unset.filter((name) => !(name in values)) });
  });
}
