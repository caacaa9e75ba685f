import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { z } from "zod";
import { CliError } from "./errors.ts";
import { SVC_GITIGNORE } from "./scaffold/templates.ts";

const LINK_PATH = join(".svc", "link.json");

/** `.svc/link.json`: binds a working directory to a project. */
export const LinkFile = z.object({
  project_id: z.uuid(),
  account_id: z.uuid(),
  host: z.string(),
  host_url: z.string(),
});
export type LinkFile = z.infer<typeof LinkFile>;

/** `.svc/link.json` in `from` or the nearest ancestor that has one. */
export function findLink(from = process.cwd()): { path: string; link: LinkFile } | undefined {
  let dir = from;
  for (;;) {
    const path = join(dir, LINK_PATH);
    if (existsSync(path)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(readFileSync(path, "utf8"));
      } catch {
        throw new CliError(`${path} is not valid JSON; run 'svc projects link' again`);
      }
      const link = LinkFile.safeParse(parsed);
      if (!link.success) throw new CliError(`${path} is not a valid link file; run 'svc projects link' again`);
      return { path, link: link.data };
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

export function writeLink(dir: string, link: LinkFile): string {
  const path = join(dir, LINK_PATH);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(link, null, 2)}\n`);
  const ignore = join(dirname(path), ".gitignore");
  if (!existsSync(ignore)) writeFileSync(ignore, SVC_GITIGNORE);
  return path;
}

export function removeLink(from = process.cwd()): string | undefined {
  const found = findLink(from);
  if (found) rmSync(found.path);
  return found?.path;
}
