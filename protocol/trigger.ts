import { z } from "zod";
import { ChangeRequest } from "./change-request.ts";
import { ManifestError } from "./manifest.ts";

/** A trigger of the default branch's manifest with its runtime state (GET /v1/projects/{id}/triggers[/{slug}]). */
export const Trigger = z.object({
  slug: z.string(),
  schedule: z.string(),
  timezone: z.string().nullable(),
  prompt: z.string(),
  enabled: z.boolean(),
  base_ref: z.string().nullable(),
  agent: z.string().nullable(),
  /** When a firing last started a session (`last_session_id`); a refused firing never moves it. */
  last_fired_at: z.string().nullable(),
  last_session_id: z.string().nullable(),
  /** Why the latest firing started no session; null once a later firing started one. */
  last_error: z.string().nullable(),
  /** The last firing that started no session (the session cap, any error) and why; kept after later sessions. */
  last_refused_at: z.string().nullable(),
  last_refusal: z.string().nullable(),
});
export type Trigger = z.infer<typeof Trigger>;

/** The list, with the manifest's error when the file on the default branch is invalid (the last good one is listed). */
export const TriggerList = z.object({ triggers: z.array(Trigger), manifest_error: ManifestError.nullable() });
export type TriggerList = z.infer<typeof TriggerList>;

/** A trigger's slug as a path parameter. */
export const TriggerParams = z.object({ projectId: z.string(), slug: z.string().min(1).max(100) });

/** POST …/triggers/{slug}/enable|disable: the CR that carries the edit of `svc.toml`. */
export const TriggerToggleResult = z.object({ change_request: ChangeRequest });
export type TriggerToggleResult = z.infer<typeof TriggerToggleResult>;
