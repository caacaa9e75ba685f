import { z } from "zod";
import { isSafeName, SafeName } from "./text.ts";

export const RepoKind = z.enum(["managed", "external"]);
export type RepoKind = z.infer<typeof RepoKind>;

export const Slug = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, "lowercase letters, digits and inner dashes only");

/**
 * The rules of `git check-ref-format --branch`, checked without spawning git: one shared rule for every branch a
 * client names (a project's default branch, a CR's head and base, a session's base), so none can be read as an
 * option (`-rf`, `--upload-pack=…`), a range (`a..b`), a reflog (`@{`) or a path out of refs/ (`../x`).
 */
export function isValidBranchName(name: string): boolean {
  if (
    name === "@" ||
    name === "HEAD" ||
    name.startsWith("-") ||
    name.startsWith("/") ||
    name.endsWith("/") ||
    name.endsWith(".")
  )
    return false;
  if (
    name.endsWith(".lock") ||
    name.includes(".lock/") ||
    name.includes("..") ||
    name.includes("//") ||
    name.includes("@{") ||
    name.includes("/.")
  ) {
    return false;
  }
  if (name.startsWith(".")) return false;
  if (!isSafeName(name)) return false;
  return ![..." ~^:?*[\\"].some((ch) => name.includes(ch));
}

export const BranchName = z.string().min(1).max(255).refine(isValidBranchName, "not a valid branch name");

/**
 * Where an external repository lives: an http(s), ssh or git URL, an scp-like `user@host:path`, or an absolute
 * path on the API's machine. Never a transport that runs commands (`ext::`) or something git could read as
 * an option.
 */
export function isAllowedRepoUrl(url: string): boolean {
  if (url.startsWith("-") || !isSafeName(url)) return false;
  if (/^(https?|ssh|git|file):\/\/[^\s]+$/i.test(url)) return true;
  if (url.startsWith("/")) return true;
  return /^[\w.-]+@[\w.-]+:[^\s]+$/.test(url) && !url.includes("::");
}

export const RepoUrl = z
  .string()
  .trim()
  .min(1)
  .max(2000)
  .refine(isAllowedRepoUrl, "must be an http(s)/ssh/git/file URL, user@host:path, or an absolute path");

export const Project = z.object({
  id: z.uuid(),
  account_id: z.uuid(),
  slug: Slug,
  name: z.string(),
  repo_kind: RepoKind,
  repo_url: z.string().nullable(),
  default_branch: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Project = z.infer<typeof Project>;

export const CreateProjectBody = z
  .object({
    name: SafeName.trim().min(1).max(200),
    slug: Slug.optional(),
    account_id: z.uuid().optional(),
    repo_url: RepoUrl.optional(),
    default_branch: BranchName.optional(),
  })
  .strict();
export type CreateProjectBody = z.infer<typeof CreateProjectBody>;

export const ProjectList = z.object({ projects: z.array(Project) });
export type ProjectList = z.infer<typeof ProjectList>;
