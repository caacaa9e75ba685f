import type { ChangeRequestRecord } from "../protocol/change-request.ts";
import type { Project } from "../protocol/project.ts";
import type { SessionStatus } from "../protocol/session.ts";

/**
 * What happens in this API process that other modules act on, each name with its payload, defined once. Emitters
 * do not know who listens: the trigger scheduler, the chat bridge and waiting requests subscribe (api/services.ts and
 * the modules themselves). In-process only: another API process of the cluster hears none of these.
 */
export type EventMap = {
  /** A session was created or moved (any status transition), or its progress line changed: the session store. */
  "session.changed": { projectId: string; sessionId: string; status: SessionStatus; progress: string | null };
  /**
   * A change request was opened, merged (its base branch moved), closed, queued to merge by itself, or approved: the
   * change-request and approval services.
   */
  "change-request.changed": {
    project: Project;
    cr: ChangeRequestRecord;
    change: "created" | "merged" | "closed" | "queued" | "approved";
  };
  /** A push into a managed repository was received: any branch may have moved, the default one included. */
  "repo.pushed": { projectId: string };
  /** A project's secrets were set or unset (`unset`: the names removed): the secret routes. */
  "secrets.changed": { projectId: string; unset: string[] };
  /** An external repository's mirror was fetched: any of its branches may have moved. */
  "repo.fetched": { projectId: string };
};

export type EventName = keyof EventMap;
export type Listener<N extends EventName> = (payload: EventMap[N]) => void | Promise<void>;

export type Events = {
  /** Calls `listener` with every later `name` event, until the function returned is called. */
  on<N extends EventName>(name: N, listener: Listener<N>): () => void;
  /**
   * Calls every listener of `name` now, in the order they subscribed. A listener that throws (or whose promise
   * rejects) is logged; the emitter and the other listeners go on as if it had not.
   */
  emit<N extends EventName>(name: N, payload: EventMap[N]): void;
};

export function createEvents(log: (msg: string, extra?: Record<string, unknown>) => void): Events {
  const listeners = new Map<EventName, Set<Listener<never>>>();
  const failed = (name: EventName) => (err: unknown) =>
    log("event listener failed", { event: name, error: String(err) });
  return {
    on(name, listener) {
      const set = listeners.get(name) ?? new Set();
      listeners.set(name, set);
      const entry = listener as Listener<never>;
      set.add(entry);
      return () => void set.delete(entry);
    },
    emit(name, payload) {
      // A copy: a listener that unsubscribes (or subscribes another) while this runs changes the next emit only.
      for (const listener of [...(listeners.get(name) ?? [])]) {
        try {
          const result = (listener as Listener<typeof name>)(payload);
          if (result instanceof Promise) result.catch(failed(name));
        } catch (err) {
          failed(name)(err);
        }
      }
    },
  };
}
