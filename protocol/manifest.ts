import { z } from "zod";

/** One `[[triggers]]` table of `svc.toml`. */
export const TriggerSpec = z.object({
  slug: z.string(),
  schedule: z.string(),
  timezone: z.string().optional(),
  prompt: z.string(),
  enabled: z.boolean().default(true),
  base_ref: z.string().optional(),
  agent: z.string().optional(),
});
export type TriggerSpec = z.infer<typeof TriggerSpec>;

/** `svc.toml` on the default branch. */
export const Manifest = z.object({
  project: z.record(z.string(), z.unknown()).optional(),
  agent: z.record(z.string(), z.unknown()).optional(),
  env: z.record(z.string(), z.unknown()).optional(),
  triggers: z.array(TriggerSpec).default([]),
  apps: z.array(z.record(z.string(), z.unknown())).default([]),
});
export type Manifest = z.infer<typeof Manifest>;

export const ManifestError = z.object({
  message: z.string(),
  line: z.number().int().nullable(),
  key: z.string().nullable(),
});
export type ManifestError = z.infer<typeof ManifestError>;
