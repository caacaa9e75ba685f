import { z } from "zod";

/** Answer of GET /v1/projects/{id}/git/clone-credential: HTTP basic credentials for the project's repo. */
export const CloneCredential = z.object({
  username: z.string(),
  password: z.string(),
  repo_url: z.string(),
  expires_at: z.string(),
});
export type CloneCredential = z.infer<typeof CloneCredential>;

/**
 * Where a session's unsaved work waits between sandboxes: the daemon pushes it there when its sandbox stops
 * (daemon/checkpoint.ts), and the API's hook lets only that session's sandbox write it (api/git/hooks.ts).
 */
export const checkpointRef = (sessionId: string) => `refs/svc/checkpoints/${sessionId}`;
