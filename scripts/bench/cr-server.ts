// The API in its own process for the load test: seeds a user, a managed project with history and an open CR,
// then prints {url, token, crPath} as one JSON line. DATABASE_URL picks PostgreSQL; otherwise PGlite in memory.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildApp } from "../../api/app.ts";
import { migrate } from "../../api/db/migrate.ts";
import { openSql } from "../../api/db/sql.ts";

const sql = await openSql(
  process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : { pgliteDir: "memory://" },
);
await migrate(sql);
let url = "";
const { app, services } = await buildApp({
  sql,
  dataDir: mkdtempSync(join(tmpdir(), "svc-bench-api-")),
  publicUrl: () => url,
  logLevel: "silent",
});
await app.listen({ port: 0, host: "127.0.0.1" });
url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

const { userId, accountId } = await services.accounts.createUserWithAccount({
  email: `bench-${process.pid}@example.test`,
  name: "bench",
  accountSlug: `bench-${process.pid}`,
});
const { token } = await services.tokens.mint({ userId });
const project = await services.projects.create({
  accountId,
  name: "bench",
  slug: "bench",
  repoKind: "managed",
  repoUrl: null,
  defaultBranch: "main",
  createdBy: userId,
});
await services.repos.initManaged(project.id, "main");
const work = mkdtempSync(join(tmpdir(), "svc-bench-work-"));
const sh = (cmd: string) =>
  execFileSync("bash", ["-c", cmd], {
    cwd: work,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "b",
      GIT_AUTHOR_EMAIL: "b@b",
      GIT_COMMITTER_NAME: "b",
      GIT_COMMITTER_EMAIL: "b@b",
    },
  });
sh(
  `git init -q -b main && for i in $(seq 1 50); do echo $i > f$i.txt; git add -A; git commit -qm c$i; done && git checkout -qb feature && echo x > feature.txt && git add -A && git commit -qm feature && git push -q ${services.repos.managedDir(project.id)} main feature`,
);
const cr = await services.changeRequests.create(project, { title: "Bench CR", head_ref: "feature" }, userId);
process.stdout.write(
  `${JSON.stringify({ url, token, crPath: `/v1/projects/${project.id}/change-requests/${cr.cr_id}`, crId: cr.cr_id })}\n`,
);
