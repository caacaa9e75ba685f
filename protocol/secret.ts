import { z } from "zod";
import { PROJECT_MODEL_SECRETS, RESERVED_ENV_PREFIX } from "./env.ts";
import { ManifestError } from "./manifest.ts";
import { SafeName, SafeText } from "./text.ts";

export const SecretName = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "letters, digits and '_' only, not starting with a digit")
  .refine(
    (n) => !n.toUpperCase().startsWith(RESERVED_ENV_PREFIX) || PROJECT_MODEL_SECRETS.includes(n),
    `the ${RESERVED_ENV_PREFIX} prefix is reserved for the platform (but ${PROJECT_MODEL_SECRETS.join(", ")}, a project's own model)`,
  );

/** A secret as listed: its name, never its value. */
export const SecretInfo = z.object({ name: z.string(), updated_at: z.string() });
export type SecretInfo = z.infer<typeof SecretInfo>;

/** A variable the default branch's manifest (`[env]` of svc.toml) expects. */
export const ExpectedEnv = z.object({ required: z.boolean(), description: z.string().optional() });
export type ExpectedEnv = z.infer<typeof ExpectedEnv>;

/**
 * GET /v1/projects/{id}/secrets: the stored names, and what the manifest on the default branch expects (`env`,
 * from its last good version when the current one is invalid, and then `manifest_error` says why).
 */
export const SecretList = z.object({
  secrets: z.array(SecretInfo),
  revision: z.number().int(),
  env: z.record(z.string(), ExpectedEnv).default({}),
  manifest_commit: z.string().nullable().default(null),
  manifest_error: ManifestError.nullable().default(null),
});
export type SecretList = z.infer<typeof SecretList>;

/** PUT /v1/projects/{id}/secrets: upsert several at once. */
export const SetSecretsBody = z
  .object({
    /** Values become a sandbox's environment: a NUL there would fail every later session of the project. */
    secrets: z.record(z.string(), SafeText.max(65_536)).superRefine((secrets, ctx) => {
      if (Object.keys(secrets).length === 0) ctx.addIssue({ code: "custom", message: "give at least one secret" });
      for (const name of Object.keys(secrets)) {
        const check = SecretName.safeParse(name);
        if (!check.success)
          ctx.addIssue({ code: "custom", path: [name], message: `'${name}': ${check.error.issues[0]!.message}` });
      }
    }),
  })
  .strict();
export type SetSecretsBody = z.infer<typeof SetSecretsBody>;

/** DELETE /v1/projects/{id}/secrets: remove several at once. */
export const UnsetSecretsBody = z.object({ names: z.array(SafeName.min(1).max(200)).min(1) }).strict();
export type UnsetSecretsBody = z.infer<typeof UnsetSecretsBody>;
