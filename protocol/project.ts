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

/** A DNS name, an IPv4 address or a bracketed IPv6 address: never empty, never an option (`-o…`). */
const REPO_HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])$/;
const REPO_SCHEMES = new Set(["https:", "http:", "ssh:", "git:"]);

/**
 * Where an external repository lives: an `https://`, `http://`, `ssh://` or `git://` URL with a host, or the
 * scp-like `user@host:path` (ssh). Never anything git reads from the API's own disk, where every project's
 * repository lives: no `file://` URL, no `file:`, no absolute or relative path (`/x`, `./x`, `x`, `~/x`,
 * `C:/x`); never a transport helper that runs commands or opens descriptors (`ext::`, `fd::`, `<scheme>::`);
 * nothing git could read as an option (`-u…`). Lower-case schemes, no whitespace or control characters.
 */
export function isAllowedRepoUrl(url: string): boolean {
  if (!isSafeName(url) || /\s/.test(url) || url.includes("\\")) return false;
  // `<transport>::<address>` hands the URL to a remote helper: `ext::` runs a command, `fd::` reads descriptors.
  if (/^[A-Za-z][A-Za-z0-9+.-]*::/.test(url)) return false;
  if (/^[a-z]+:\/\//.test(url)) {
    // `https:///x` is not "no host" to a URL parser: it takes `x` as the host. Refuse it before parsing.
    if (!/^(?:https?|ssh|git):\/\/[^/]/.test(url) || !URL.canParse(url)) return false;
    const parsed = new URL(url);
    return REPO_SCHEMES.has(parsed.protocol) && REPO_HOST.test(parsed.hostname) && !parsed.username.startsWith("-");
  }
  const scp = /^([A-Za-z0-9._~+][A-Za-z0-9._~+-]*)@([^:/]+|\[[^\]]+\]):(.+)$/.exec(url);
  return scp !== null && REPO_HOST.test(scp[2]!);
}

export const RepoUrl = z
  .string()
  .trim()
  .min(1)
  .max(2000)
  .refine(
    isAllowedRepoUrl,
    "must be an https, http, ssh or git URL, or user@host:path; local paths, file URLs and transport helpers are refused",
  );

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
