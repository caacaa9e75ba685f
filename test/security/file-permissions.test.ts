import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { openSql } from "../../api/db/sql.ts";
import { call, seedUser, startApi } from "../support/api-server.ts";
import { BIN, cliHome, freePort, svc } from "../support/cli.ts";
import { freshDatabase } from "../support/databases.ts";

const mode = (path: string) => statSync(path).mode & 0o777;

/** Every entry under `root` that anyone but its owner may write (symlinks are not followed). */
function worldWritable(root: string): string[] {
  const found: string[] = [];
  const walk = (path: string) => {
    const st = lstatSync(path);
    if (st.isSymbolicLink()) return;
    if (st.mode & 0o002) found.push(`${path} ${(st.mode & 0o777).toString(8)}`);
    if (st.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(root);
  return found;
}

/** Runs `fn` as if the process had been started with umask 000, the worst a user's shell could hand over. */
async function withUmask<T>(mask: number, fn: () => Promise<T>): Promise<T> {
  const previous = process.umask(mask);
  try {
    return await fn();
  } finally {
    process.umask(previous);
  }
}

describe("the data directory is its owner's alone (issue 10, item 5)", () => {
  it("creates the PGlite directory, the data directory and repositories at 0700 whatever the umask", async () => {
    const root = mkdtempSync(join(tmpdir(), "svc-perms-"));
    await withUmask(0, async () => {
      const pgliteDir = join(root, "home", "data", "pglite");
      const sql = await openSql({ pgliteDir });
      await sql.close();
      expect(mode(pgliteDir).toString(8)).toBe("700");
      expect(mode(join(root, "home", "data")).toString(8)).toBe("700");
      // PGlite chmods its initial files to 0666 itself: they are tightened once it is open.
      expect(worldWritable(pgliteDir)).toEqual([]);

      // An existing data directory left world-writable by an older version is tightened too.
      const dataDir = join(root, "api-data");
      mkdirSync(dataDir, { mode: 0o777 });
      const db = await freshDatabase("pglite");
      const api = await startApi(db.sql, { dataDir });
      try {
        const { token } = await seedUser(api.services);
        const project = await call(api.url, "POST", "/v1/projects", { token, body: { name: "Private" } });
        expect(project.status).toBe(201);
        expect(mode(dataDir).toString(8)).toBe("700");
        expect(mode(join(dataDir, "git-hooks")).toString(8)).toBe("700");
        expect(mode(join(dataDir, "repos")).toString(8)).toBe("700");
        expect(mode(api.services.repos.managedDir(project.body.id)).toString(8)).toBe("700");
      } finally {
        await api.close();
        await db.drop();
      }
    });
  });

  describe("svc self-host start (the real CLI and API)", () => {
    const home = cliHome();
    const svcHome = home.env.SVC_HOME!;
    afterAll(async () => {
      await svc(["self-host", "stop"], { env: home.env });
    });

    it("tightens an existing 0755 $SVC_HOME to 0700 and leaves nothing world-writable under it", async () => {
      mkdirSync(svcHome, { recursive: true, mode: 0o755 });
      writeFileSync(join(svcHome, "notes.txt"), "mine\n", { mode: 0o600 });
      expect(mode(svcHome).toString(8)).toBe("755");
      const port = await freePort();
      // Started from a shell with umask 000: the stack must not rely on the caller's umask.
      const start = await execa(
        "sh",
        ["-c", 'umask 000 && exec "$@"', "sh", process.execPath, BIN, "self-host", "start", "--port", String(port)],
        { env: home.env, extendEnv: true, reject: false, timeout: 120_000 },
      );
      expect(start.exitCode, start.stderr).toBe(0);
      expect(mode(svcHome).toString(8)).toBe("700");

      // A managed repository and some rows, so git's and PGlite's files exist.
      const config = JSON.parse(readFileSync(home.env.SVC_CONFIG_FILE!, "utf8"));
      const { url, token } = config.hosts.selfhost;
      const project = await call(url, "POST", "/v1/projects", { token, body: { name: "Perms" } });
      expect(project.status).toBe(201);
      const secrets = await call(url, "PUT", `/v1/projects/${project.body.id}/secrets`, {
        token,
        body: { secrets: { TOKEN: "value" } },
      });
      expect(secrets.status).toBe(200);

      expect(mode(join(svcHome, "data")).toString(8)).toBe("700");
      expect(mode(join(svcHome, "data", "pglite")).toString(8)).toBe("700");
      expect(mode(join(svcHome, "data", "repos", `${project.body.id}.git`)).toString(8)).toBe("700");
      expect(worldWritable(svcHome)).toEqual([]);
    });
  });
});
