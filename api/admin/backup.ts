import { createReadStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { BackupRepositories, BackupRepository } from "../../protocol/admin.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { git } from "../git/run.ts";

export type BackupRouteDeps = {
  sql: Sql;
  /** Where the managed repositories live (`<data>/repos/<project id>.git`). */
  reposDir: string;
};

/** A bundle of a large repository takes a while; no backup waits longer than this for one. */
const BUNDLE_TIMEOUT_MS = 15 * 60_000;

const managedDir = (reposDir: string, projectId: string) => join(reposDir, `${projectId}.git`);

/** What a managed repository's bundle holds: HEAD's branch and how many refs (0: empty, no bundle possible). */
async function describe(dir: string, project: { id: string; slug: string }): Promise<BackupRepository> {
  const refs = (await git(["for-each-ref", "--format=%(refname)"], { dir })).stdout.split("\n").filter(Boolean);
  const head = (await git(["symbolic-ref", "HEAD"], { dir, okCodes: [1, 128] })).stdout.trim();
  return { project_id: project.id, slug: project.slug, head: head || "refs/heads/main", refs: refs.length };
}

/** Sends a file made for this answer and removes it (and its directory) once sent or abandoned. */
function sendTemporary(reply: FastifyReply, dir: string, file: string, type: string) {
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const stream = createReadStream(file);
  stream.on("close", cleanup);
  reply.raw.on("close", () => {
    stream.destroy();
    cleanup();
  });
  return reply.type(type).header("content-length", statSync(file).size).send(stream);
}

/**
 * What `svc self-host backup` reads through the running API, in this order: the database (embedded PGlite only: a
 * compose stack's PostgreSQL is dumped with pg_dump), then the managed repositories one bundle each. A repository is
 * read after the database, so every commit a CR or session row names is in it (a merge moves the branch before it
 * records the CR; the merge repair at start settles one caught in between).
 */
export function backupRoutes(deps: BackupRouteDeps) {
  return async (app: FastifyInstance) => {
    app.get("/v1/admin/backup/database", { config: { auth: "account" } }, async (_req, reply) => {
      if (!deps.sql.dumpDataDir) {
        throw apiError(
          "CONFLICT",
          "this stack's database is PostgreSQL: it is dumped with pg_dump, not through the API",
        );
      }
      const dump = Buffer.from(await (await deps.sql.dumpDataDir()).arrayBuffer());
      return reply.type("application/gzip").header("content-length", dump.length).send(dump);
    });

    app.get("/v1/admin/backup/repositories", { config: { auth: "account" } }, async () => {
      const projects = await deps.sql.query<{ id: string; slug: string }>(
        "select id::text as id, slug from projects where repo_kind = 'managed' order by created_at, id",
      );
      const repositories: BackupRepository[] = [];
      for (const project of projects) {
        const dir = managedDir(deps.reposDir, project.id);
        if (existsSync(dir)) repositories.push(await describe(dir, project));
      }
      const [counts] = await deps.sql.query<BackupRepositories["counts"]>(
        `select (select count(*) from projects)::int as projects,
                (select count(*) from change_requests)::int as change_requests,
                (select count(*) from project_secrets)::int as secrets,
                (select count(*) from project_sessions)::int as sessions`,
      );
      return { repositories, counts: counts! } satisfies BackupRepositories;
    });

    /** One managed repository as a `git bundle` of all its refs: git reads refs, then packs what they reach. */
    app.get<{ Params: { projectId: string } }>(
      "/v1/admin/backup/repositories/:projectId/bundle",
      { config: { auth: "account" } },
      async (req, reply) => {
        const [project] = await deps.sql.query<{ id: string; slug: string }>(
          "select id::text as id, slug from projects where id::text = $1 and repo_kind = 'managed'",
          [req.params.projectId],
        );
        const dir = project && managedDir(deps.reposDir, project.id);
        if (!dir || !existsSync(dir)) throw apiError("NOT_FOUND", "no managed repository for this project");
        if ((await describe(dir, project)).refs === 0) throw apiError("CONFLICT", "the repository is empty");
        const tmp = mkdtempSync(join(tmpdir(), "svc-bundle-"));
        const file = join(tmp, "repo.bundle");
        try {
          await git(["bundle", "create", "--quiet", file, "--all"], { dir, timeoutMs: BUNDLE_TIMEOUT_MS });
        } catch (err) {
          rmSync(tmp, { recursive: true, force: true });
          throw err;
        }
        return sendTemporary(reply, tmp, file, "application/x-git-bundle");
      },
    );
  };
}
