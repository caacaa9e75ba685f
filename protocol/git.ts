import { z } from "zod";

/** Answer of GET /v1/projects/{id}/git/clone-credential: HTTP basic credentials for the project's repo. */
export const CloneCredential = z.object({
  username: z.string(),
  password: z.string(),
  repo_url: z.string(),
  expires_at: z.string(),
});
export type CloneCredential = z.infer<typeof CloneCredential>;
