import { z } from "zod";
import { CheckSpec, ReviewSection } from "./cr-check.ts";
import { parseEgressEntry } from "./egress.ts";
import { RESERVED_ENV_PREFIX } from "./env.ts";
import { BranchName } from "./project.ts";

/** The manifest's file name at the root of a project's repository. */
export const MANIFEST_FILE = "svc.toml";
export const DEFAULT_AGENT_CONFIG_DIR = ".svc/agent";

export const TriggerSlug = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9-]+$/, "lowercase letters, digits and '-' only");

const CRON_FIELD = /^[0-9A-Za-z*,/?#-]+$/;

/** A cron expression: five fields (minute first), or six with seconds first. node-cron has the last word. */
export const CronSchedule = z
  .string()
  .trim()
  .min(1, "give a cron expression")
  .superRefine((expr, ctx) => {
    const fields = expr.split(/\s+/);
    if (fields.length !== 5 && fields.length !== 6) {
      ctx.addIssue({
        code: "custom",
        message: `'${expr}' has ${fields.length} fields; a cron schedule has 5 (minute hour day month weekday) or 6 (seconds first)`,
      });
      return;
    }
    const bad = fields.find((f) => !CRON_FIELD.test(f));
    if (bad !== undefined)
      ctx.addIssue({
        code: "custom",
        message: `'${bad}' is not a cron field (digits, names, '*', ',', '-', '/' only)`,
      });
  });

/** An IANA time zone the runtime knows (`Europe/Berlin`, `UTC`). */
export const TimeZone = z
  .string()
  .min(1)
  .refine((tz) => {
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: tz });
      return true;
    } catch {
      return false;
    }
  }, "unknown time zone");

/** One `[[triggers]]` entry: a session started on a schedule. */
export const TriggerSpec = z
  .object({
    slug: TriggerSlug,
    schedule: CronSchedule,
    timezone: TimeZone.optional(),
    prompt: z.string().refine((p) => p.trim().length > 0, "give the prompt the session starts with"),
    enabled: z.boolean().default(true),
    /** The branch the session starts from; default the project's default branch. */
    base_ref: BranchName.optional(),
    /** The agent the session starts with; default `[agent].name`. */
    agent: z.string().min(1).optional(),
  })
  .strict();
export type TriggerSpec = z.infer<typeof TriggerSpec>;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One `[env]` entry: `NAME = { required = true, description = "…" }` or `NAME = "description"`. */
export const EnvVarSpec = z.union(
  [
    z.string().transform((description) => ({ required: false, description })),
    z.object({ required: z.boolean().default(false), description: z.string().optional() }).loose(),
  ],
  { error: 'a description string, or { required = true, description = "…" }' },
);
export type EnvVarSpec = z.infer<typeof EnvVarSpec>;

/** `[env]`: the secrets the project expects. Values never live here: they are in the secrets manager. */
export const EnvSpec = z.record(z.string(), EnvVarSpec).superRefine((env, ctx) => {
  for (const name of Object.keys(env)) {
    if (!ENV_NAME.test(name))
      ctx.addIssue({
        code: "custom",
        path: [name],
        message: "letters, digits and '_' only, not starting with a digit",
      });
    else if (name.toUpperCase().startsWith(RESERVED_ENV_PREFIX))
      ctx.addIssue({
        code: "custom",
        path: [name],
        message: `the ${RESERVED_ENV_PREFIX} prefix is reserved for the platform`,
      });
  }
});
export type EnvSpec = z.infer<typeof EnvSpec>;

/** An app's name: part of its hostname (`<name>--<project>.<preview domain>`), so a DNS label's rules apply. */
export const AppName = z
  .string()
  .min(1)
  .max(24)
  .regex(/^[a-z0-9-]+$/, "lowercase letters, digits and '-' only")
  .refine((n) => !n.startsWith("-") && !n.endsWith("-"), "must not start or end with '-'")
  .refine((n) => !n.includes("--"), "must not contain '--' (it separates the app from the project in its URL)");

export const DEFAULT_APP_DOCKERFILE = ".svc/Dockerfile";

/** A path inside the repository: relative, no `..`. */
const RepoPath = z
  .string()
  .min(1)
  .refine(
    (p) => !p.startsWith("/") && !p.split("/").includes(".."),
    "a path inside the repository (relative, no '..')",
  );

/** One `[[apps]]` entry: a long-running app deployed from the default branch. */
export const AppSpec = z
  .object({
    name: AppName,
    /** The Dockerfile's path in the repository; when the file does not exist the platform image runs the app. */
    build: RepoPath.default(DEFAULT_APP_DOCKERFILE),
    /** The directory the build sees as its source; default the repository's root. */
    context: RepoPath.default("."),
    /** Run by `sh -c`; optional when the image has a CMD. */
    command: z.string().min(1).optional(),
    port: z.number().int().min(1).max(65_535),
    /** Project secrets (by name) the app gets as env vars. */
    env: z.array(z.string().regex(ENV_NAME, "a secret's name: letters, digits and '_'")).default([]),
    health_path: z.string().startsWith("/").default("/"),
  })
  .strict();
export type AppSpec = z.infer<typeof AppSpec>;

export const ProjectSection = z.object({ name: z.string().optional() }).loose();
export const AgentSection = z
  .object({
    name: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    config_dir: z.string().min(1).default(DEFAULT_AGENT_CONFIG_DIR),
  })
  .loose();

/** One `[sandbox] egress` entry: `host`, `*.domain`, an IPv4 address, each with an optional `:port`. */
export const EgressEntry = z
  .string()
  .trim()
  .toLowerCase()
  .superRefine((entry, ctx) => {
    const parsed = parseEgressEntry(entry);
    if ("error" in parsed) ctx.addIssue({ code: "custom", message: parsed.error });
  });

/** `[sandbox]`: `egress` absent, open egress; a list (even empty), only those hosts, through the API's proxy. */
export const SandboxSection = z.object({ egress: z.array(EgressEntry).max(500).optional() }).loose();

/** `svc.toml` as read from the default branch. */
export const Manifest = z
  .object({
    project: ProjectSection.prefault({}),
    agent: AgentSection.prefault({}),
    sandbox: SandboxSection.prefault({}),
    env: EnvSpec.prefault({}),
    triggers: z.array(TriggerSpec).default([]),
    apps: z.array(AppSpec).default([]),
    checks: z.array(CheckSpec).max(20).default([]),
    review: ReviewSection.prefault({}),
  })
  .superRefine((m, ctx) => {
    const seen = new Set<string>();
    m.triggers.forEach((t, i) => {
      if (seen.has(t.slug))
        ctx.addIssue({ code: "custom", path: ["triggers", i, "slug"], message: `duplicate trigger slug '${t.slug}'` });
      seen.add(t.slug);
    });
    const apps = new Set<string>();
    m.apps.forEach((a, i) => {
      if (apps.has(a.name))
        ctx.addIssue({ code: "custom", path: ["apps", i, "name"], message: `duplicate app name '${a.name}'` });
      apps.add(a.name);
    });
    const checks = new Set<string>();
    m.checks.forEach((c, i) => {
      if (checks.has(c.name))
        ctx.addIssue({ code: "custom", path: ["checks", i, "name"], message: `duplicate check name '${c.name}'` });
      checks.add(c.name);
    });
  });
export type Manifest = z.infer<typeof Manifest>;

/** Why a manifest was refused: the message, and where when known (1-based line, `triggers[1].schedule`). */
export const ManifestError = z.object({
  message: z.string(),
  line: z.number().int().nullable(),
  key: z.string().nullable(),
});
export type ManifestError = z.infer<typeof ManifestError>;
