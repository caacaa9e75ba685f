import { z } from "zod";

export const HostName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9._-]*$/, "lowercase letters, digits, '.', '_' and '-' only");

/** A host as stored in the CLI config: the API origin (without `/v1`) and, once logged in, a token. */
export const HostEntry = z.object({
  url: z.url(),
  token: z.string().optional(),
});
export type HostEntry = z.infer<typeof HostEntry>;

/** A host as the CLI shows it: never carries the token. */
export const Host = z.object({
  name: HostName,
  url: z.string(),
  active: z.boolean(),
  builtin: z.boolean(),
  logged_in: z.boolean(),
});
export type Host = z.infer<typeof Host>;

export const CliConfig = z.object({
  active_host: HostName.default("selfhost"),
  hosts: z.record(HostName, HostEntry).default({}),
});
export type CliConfig = z.infer<typeof CliConfig>;
