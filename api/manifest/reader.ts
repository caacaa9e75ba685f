import { parse } from "smol-toml";
import { Manifest, type ManifestError } from "../../protocol/manifest.ts";
import type { Project } from "../../protocol/project.ts";
import type { Sql } from "../db/sql.ts";
import type { Repositories } from "../git/repositories.ts";
import { git } from "../git/run.ts";

export type ManifestRead = { commit: string | null; manifest: Manifest; error: ManifestError | null };

/** `svc.toml` at the default branch's tip; an invalid file reports its error and keeps the last good manifest. */
export function createManifestReader(deps: { repos: Repositories; sql: Sql }): {
  read(project: Project): Promise<ManifestRead>;
} {
  const lastGood = new Map<string, Manifest>();
  return {
    async read(project) {
      const empty = Manifest.parse({});
      const dir = await deps.repos.open(project);
      const tip = await git(["rev-parse", "--verify", "--quiet", `refs/heads/${project.default_branch}^{commit}`], {
        dir,
        okCodes: [1, 128],
      });
      if (tip.exitCode !== 0) return { commit: null, manifest: lastGood.get(project.id) ?? empty, error: null };
      const commit = tip.stdout.trim();
      const file = await git(["show", `${commit}:svc.toml`], { dir, okCodes: [128] });
      if (file.exitCode !== 0) return { commit, manifest: empty, error: null };
      let error: ManifestError;
      try {
        const parsed = Manifest.safeParse(parse(file.stdout));
        if (parsed.success) {
          lastGood.set(project.id, parsed.data);
          return { commit, manifest: parsed.data, error: null };
        }
        const issue = parsed.error.issues[0]!;
        error = { message: issue.message, line: null, key: issue.path.join(".") || null };
      } catch (err) {
        const e = err as Error & { line?: number };
        error = { message: e.message.split("\n")[0]!, line: e.line ?? null, key: null };
      }
      return { commit, manifest: lastGood.get(project.id) ?? empty, error };
    },
  };
}
