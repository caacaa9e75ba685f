import { z } from "zod";
import { DEFAULT_PREVIEW_PORT } from "./env.ts";

/** `svc sessions preview`: a link to one sandbox port that works without an Authorization header. */
export const PreviewPort = z.coerce.number().int().min(1).max(65535);

/** In a JSON body the port is a number: `"3000"` or `true` is a wrong type there, not something to coerce. */
export const CreatePreviewBody = z.object({ port: z.int().min(1).max(65535).default(DEFAULT_PREVIEW_PORT) }).strict();
export type CreatePreviewBody = z.infer<typeof CreatePreviewBody>;

export const PreviewLink = z.object({
  /** At the root of its own origin (`<port>-<session>.<preview domain>`), never the API's or the dashboard's. */
  url: z.string(),
  port: z.number().int(),
  expires_at: z.string(),
});
export type PreviewLink = z.infer<typeof PreviewLink>;
