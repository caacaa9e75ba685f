import { z } from "zod";

/** `.svc/link.json`: binds a working directory to a project. */
export const LinkFile = z.object({
  project_id: z.uuid(),
  account_id: z.uuid(),
  host: z.string(),
  host_url: z.string(),
});
export type LinkFile = z.infer<typeof LinkFile>;
