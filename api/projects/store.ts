import type { Project } from "../../protocol/project.ts";
import { iso, isUniqueViolation } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { createTtlCache } from "../ttl-cache.ts";

type ProjectRow = Omit<Project, "created_at" | "updated_at"> & { created_at: Date; updated_at: Date };

const COLUMNS = "id, account_id, slug, name, repo_kind, repo_url, default_branch, created_at, updated_at";
const PROJECT_TTL_MS = 5000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (s: string) => UUID.test(s);

/** Managed repositories have no stored URL: theirs is the API's own git endpoint, wherever it is served. */
export type CloneUrlOf = (projectId: string) => string;

/** A slug derived from a display name: what a user would type. */
export function slugify(name: string): string {
  const slug = name
    .normalize("NFKD")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/, "");
  return slug || "project";
}

export type NewProject = {
  accountId: string;
  name: string;
  slug: string;
  repoKind: Project["repo_kind"];
  repoUrl: string | null;
  defaultBranch: string;
  createdBy: string;
};

export function createProjectStore(sql: Sql, cloneUrlOf: CloneUrlOf) {
  const toProject = (row: ProjectRow): Project => ({
    ...row,
    repo_url: row.repo_kind === "managed" ? cloneUrlOf(row.id) : row.repo_url,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  const byIdCache = createTtlCache<string, Project | undefined>(PROJECT_TTL_MS);
  return {
    byId(id: string): Promise<Project | undefined> {
      if (!isUuid(id)) return Promise.resolve(undefined);
      return byIdCache.get(id.toLowerCase(), async () => {
        const [row] = await sql.query<ProjectRow>(`select ${COLUMNS} from projects where id = $1`, [id]);
        return row && toProject(row);
      });
    },

    /** Projects with this slug on any of the given accounts. */
    async bySlug(slug: string, accountIds: string[]): Promise<Project[]> {
      const rows = await sql.query<ProjectRow>(
        `select ${COLUMNS} from projects where slug = $1 and account_id = any($2::uuid[])`,
        [slug, accountIds],
      );
      return rows.map(toProject);
    },

    async listForAccounts(accountIds: string[]): Promise<Project[]> {
      const rows = await sql.query<ProjectRow>(
        `select ${COLUMNS} from projects where account_id = any($1::uuid[]) order by created_at, slug`,
        [accountIds],
      );
      return rows.map(toProject);
    },

    async remove(id: string): Promise<void> {
      await sql.query("delete from projects where id = $1", [id]);
      byIdCache.delete(id);
    },

    async create(p: NewProject): Promise<Project> {
      try {
        const [row] = await sql.query<ProjectRow>(
          `insert into projects (account_id, name, slug, repo_kind, repo_url, default_branch, created_by)
           values ($1, $2, $3, $4, $5, $6, $7) returning ${COLUMNS}`,
          [p.accountId, p.name, p.slug, p.repoKind, p.repoUrl, p.defaultBranch, p.createdBy],
        );
        return toProject(row!);
      } catch (err) {
        if (isUniqueViolation(err))
          throw apiError("SLUG_TAKEN", `a project with slug '${p.slug}' already exists`, { field: "slug" });
        throw err;
      }
    },
  };
}

export type ProjectStore = ReturnType<typeof createProjectStore>;
