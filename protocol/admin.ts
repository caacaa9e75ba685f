import { z } from "zod";

/** `POST /v1/admin/sessions/stop`: the sessions it stopped (what `svc self-host stop --sandboxes` reports). */
export const StoppedSessions = z.object({ stopped: z.array(z.string()) });
export type StoppedSessions = z.infer<typeof StoppedSessions>;

/** `GET /v1/admin/backup/repositories`: the managed repositories a backup takes, one `git bundle` each. */
export const BackupRepository = z.object({
  project_id: z.string().min(1),
  /** The project's slug, for people reading what a backup holds. */
  slug: z.string(),
  /** What HEAD points at (`refs/heads/main`): a bundle carries HEAD's commit, not the branch it names. */
  head: z.string().min(1),
  /** Its refs, branches and hidden ones alike; 0: an empty repository (no bundle: git refuses an empty one). */
  refs: z.number().int().min(0),
});
export type BackupRepository = z.infer<typeof BackupRepository>;
export const BackupRepositories = z.object({
  repositories: z.array(BackupRepository),
  /** How many of each the database held when the repositories were listed (after its snapshot): for the report. */
  counts: z.object({
    projects: z.number().int(),
    change_requests: z.number().int(),
    secrets: z.number().int(),
    sessions: z.number().int(),
  }),
});
export type BackupRepositories = z.infer<typeof BackupRepositories>;

/**
 * `$SVC_HOME/data/restore/restore.json`, written by `svc self-host restore` beside the repositories' bundles
 * (`repos/<project id>.bundle`): what the API does once, at its next start, with the data it finds restored. It
 * takes `installation` as its id in place of `source_installation` (the backed-up stack's), so it never acts on
 * the original stack's containers, and leaves nothing of the original's sandboxes, apps and admin token usable.
 */
export const RestorePlan = z.object({
  format: z.literal(1),
  source_installation: z.uuid(),
  installation: z.uuid(),
  repositories: z.array(BackupRepository),
});
export type RestorePlan = z.infer<typeof RestorePlan>;
