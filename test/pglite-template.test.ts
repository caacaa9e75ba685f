import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadMigrations } from "../api/db/migrate.ts";
import { openSql } from "../api/db/sql.ts";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { type ApiProcess, startApiProcess } from "./support/api-process.ts";
import { call } from "./support/api-server.ts";

const TEMPLATE_LINE = "a new embedded database, copied from the bundle's template";

/** What an embedded home's database holds, read after its API stopped (PGlite takes one process at a time). */
async function storedIn(home: string) {
  const sql = await openSql({ pgliteDir: join(home, "data", "pglite") });
  try {
    const [installation] = await sql.query<{ id: string }>("select id from installation");
    const migrations = await sql.query<{ name: string }>("select name from schema_migrations order by version");
    return { installation: installation!.id, migrations: migrations.map((m) => m.name) };
  } finally {
    await sql.close();
  }
}

describe("a new embedded stack's database (the bundle's PGlite template)", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-pglite-template-"));
  const admin = newSecret("svc_pat_");
  const running: ApiProcess[] = [];
  const start = async (home: string) => {
    const api = await startApiProcess({
      SVC_HOME: join(dir, home),
      SVC_LOG_LEVEL: "info",
      SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(admin),
    });
    running.push(api);
    return api;
  };
  afterAll(async () => {
    await Promise.all(running.map((api) => api.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("two new homes start from the template, each an installation of its own with every migration applied", async () => {
    const [first, second] = await Promise.all([start("first"), start("second")]);
    for (const api of [first, second]) expect(api.log()).toContain(TEMPLATE_LINE);
    await Promise.all([first.stop(), second.stop()]);
    const [a, b] = await Promise.all([storedIn(join(dir, "first")), storedIn(join(dir, "second"))]);
    // Sandboxes carry the installation id as a label: two stacks on one engine with one id reconcile each other's.
    expect(a.installation).not.toBe(b.installation);
    const all = loadMigrations().map((m) => m.name);
    expect(a.migrations).toEqual(all);
    expect(b.migrations).toEqual(all);
  });

  it("a home that has a database keeps it on restart: its data and installation, no copy over it", async () => {
    const api = await start("kept");
    const created = await call(api.url, "POST", "/v1/projects", { token: admin, body: { name: "Kept" } });
    expect(created.status).toBe(201);
    await api.stop();
    const before = await storedIn(join(dir, "kept"));

    const again = await start("kept");
    expect(again.log()).not.toContain(TEMPLATE_LINE);
    const listed = await call(again.url, "GET", "/v1/projects", { token: admin });
    expect(listed.body.projects.map((p: { name: string }) => p.name)).toContain("Kept");
    await again.stop();
    expect((await storedIn(join(dir, "kept"))).installation).toBe(before.installation);
  });
});
