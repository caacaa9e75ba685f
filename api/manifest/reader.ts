import { MANIFEST_FILE, Manifest, ManifestError } from "../../protocol/manifest.ts";
import type { Project } from "../../protocol/project.ts";
import type { Sql } from "../db/sql.ts";
import type { Repositories } from "../git/repositories.ts";
import { git } from "../git/run.ts";
import { parseManifest } from "./parse.ts";

export type ManifestRead = { commit: string | null; manifest: Manifest; error: ManifestError | null };

type Parsed = { manifest: Manifest } | { error: ManifestError } | { absent: true };
type Row = { commit: string; error: unknown; manifest: unknown; manifest_commit: string | null };

/** Parsed manifests kept per commit; a commit's svc.toml never changes, so entries only ever age out. */
const COMMIT_CACHE_SIZE = 500;

const emptyManifest = (): Manifest => Manifest.parse({});

/** jsonb comes back parsed from both drivers; a row written by an older schema falls back to the default. */
function storedManifest(value: unknown): Manifest {
  const json = typeof value === "string" ? JSON.parse(value) : value;
  const parsed = Manifest.safeParse(json);
  return parsed.success ? parsed.data : emptyManifest();
}

function storedError(value: unknown): ManifestError | null {
  if (value === null || value === undefined) return null;
  const parsed = ManifestError.safeParse(typeof value === "string" ? JSON.parse(value) : value);
  return parsed.success ? parsed.data : null;
}

/**
 * The manifest in force for each project: `svc.toml` at the tip of its default branch (never a working copy), so a
 * manifest change takes effect only once a CR merges it. The last good manifest is kept in the database.
 */
export function createManifestReader(deps: { repos: Repositories; sql: Sql }) {
  const byCommit = new Map<string, Parsed>();
  /** What this process last answered per project, to skip the database while the tip stays put. */
  const lastRead = new Map<string, ManifestRead>();

  async function parseAt(dir: string, sha: string): Promise<Parsed> {
    const hit = byCommit.get(sha);
    if (hit) return hit;
    // 128: no svc.toml at that commit (or not a file there).
    const shown = await git(["cat-file", "blob", `${sha}:${MANIFEST_FILE}`], { dir, okCodes: [128] });
    const parsed: Parsed = shown.exitCode === 0 ? parseManifest(shown.stdout) : { absent: true };
    if (byCommit.size >= COMMIT_CACHE_SIZE) byCommit.delete(byCommit.keys().next().value!);
    byCommit.set(sha, parsed);
    return parsed;
  }

  async function stored(projectId: string): Promise<Row | undefined> {
    const [row] = await deps.sql.query<Row>(
      "select commit, error, manifest, manifest_commit from project_manifests where project_id = $1",
      [projectId],
    );
    return row;
  }

  async function save(projectId: string, read: ManifestRead, manifestCommit: string | null): Promise<void> {
    await deps.sql.query(
      `insert into project_manifests (project_id, commit, error, manifest, manifest_commit, updated_at)
       values ($1, $2, $3::text::jsonb, $4::text::jsonb, $5, now())
       on conflict (project_id) do update set commit = excluded.commit, error = excluded.error,
         manifest = excluded.manifest, manifest_commit = excluded.manifest_commit, updated_at = now()`,
      [
        projectId,
        read.commit,
        read.error ? JSON.stringify(read.error) : null,
        JSON.stringify(read.manifest),
        manifestCommit,
      ],
    );
  }

  return {
    /**
     * The manifest at the tip of the project's default branch (never a working copy). When the file there is
     * invalid: `error` is set and `manifest` is the last good one (else the empty default). No svc.toml: empty
     * default, no error. An unreachable repository serves what was stored last.
     */
    async read(project: Project): Promise<ManifestRead> {
      const tips = await deps.repos.tips(project);
      if (!tips) {
        const row = await stored(project.id);
        return row
          ? { commit: row.commit, manifest: storedManifest(row.manifest), error: storedError(row.error) }
          : { commit: null, manifest: emptyManifest(), error: null };
      }
      const sha = tips.get(project.default_branch);
      if (!sha) return { commit: null, manifest: emptyManifest(), error: null };
      const known = lastRead.get(project.id);
      if (known?.commit === sha) return known;

      const parsed = await parseAt(await deps.repos.open(project), sha);
      const row = await stored(project.id);
      let read: ManifestRead;
      let manifestCommit: string | null = sha;
      if ("error" in parsed) {
        read = {
          commit: sha,
          manifest: row ? storedManifest(row.manifest) : emptyManifest(),
          error: parsed.error,
        };
        manifestCommit = row?.manifest_commit ?? null;
      } else {
        read = { commit: sha, manifest: "manifest" in parsed ? parsed.manifest : emptyManifest(), error: null };
      }
      if (row?.commit !== sha) await save(project.id, read, manifestCommit);
      lastRead.set(project.id, read);
      return read;
    },
  };
}

export type ManifestReader = ReturnType<typeof createManifestReader>;
