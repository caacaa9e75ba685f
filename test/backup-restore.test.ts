import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type Docker from "dockerode";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHome, freePort, shipNewApp, svc } from "./support/cli.ts";
import { removeProjectContainers, requireDocker } from "./support/docker.ts";
import { GIT_ENV } from "./support/git-fixture.ts";
import { waitFor } from "./support/wait.ts";

const INSTALLATION = "dev.svc.installation";

/**
 * `svc self-host backup` of a running stack and `svc self-host restore` into a fresh home, with the real CLI, the
 * API on PGlite and sandboxes on the Docker engine. The original keeps running throughout: the restored stack is a
 * new installation, and its reconciler never touches the original's sandboxes (its warm pool's among them).
 */
describe("self-host backup while running, restore into a fresh home (real CLI, real Docker)", () => {
  const a = cliHome();
  const b = cliHome();
  const app = join(a.dir, "app");
  const file = join(a.dir, "stack-backup.tar.gz");
  const inA = (args: string[]) => svc(args, { env: a.env, cwd: app });
  // The app directory is linked to host `selfhost`: in B's config that host is the restored stack.
  const inB = (args: string[]) => svc(args, { env: b.env, cwd: app });
  const stateOf = async (home: typeof a) =>
    JSON.parse(await readFile(join(home.env.SVC_HOME!, "selfhost.json"), "utf8")) as {
      admin_token: string;
      secrets_key: string;
      port: number;
    };
  let docker: Docker;
  let project: string;
  let portA: number;
  let portB: number;
  let sessionA: string;
  /** A's session sandbox and its warm pool's member: what B must never touch. */
  let containersA: string[] = [];
  let installationA: string;

  const installationAt = async (port: number, token: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/admin/installation`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: res.status, id: res.ok ? ((await res.json()) as { id: string }).id : undefined };
  };
  const projectContainers = async () =>
    docker.listContainers({ all: true, filters: { label: [`dev.svc.project=${project}`] } });

  beforeAll(async () => {
    docker = await requireDocker();
    portA = await freePort();
    portB = await freePort();
    const start = await svc(["self-host", "start", "--port", String(portA)], { env: a.env });
    expect(start.code, start.stderr).toBe(0);
    project = await shipNewApp(app, inA);
  }, 300_000);
  afterAll(async () => {
    await svc(["self-host", "stop", "--sandboxes"], { env: b.env });
    await svc(["self-host", "stop", "--sandboxes"], { env: a.env });
    await removeProjectContainers(docker, project);
  }, 120_000);

  it("backs up the running stack, sandboxes and all, into one 0600 file and says what went in", async () => {
    expect((await inA(["secrets", "set", "GREETING=from-the-original"])).code).toBe(0);
    const created = await inA(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    sessionA = created.stdout.trim();
    // A commit on main shipped again: a new branch and CR #1, open.
    await execa("bash", ["-c", "echo more > more.txt && git add more.txt && git commit -qm 'more words'"], {
      cwd: app,
      env: GIT_ENV,
    });
    const shipped = await inA(["ship"]);
    expect(shipped.code, shipped.stderr).toBe(0);
    expect(shipped.stderr).toContain("CR #1");
    // The session's sandbox, and the pooled one the warm pool makes after it.
    const running = await waitFor(
      "A's session sandbox and a pooled sandbox",
      async () => {
        const list = (await projectContainers()).filter((c) => c.State === "running");
        const pooled = list.filter((c) => c.Labels["dev.svc.pool"]);
        const own = list.filter((c) => c.Labels["dev.svc.session"] === sessionA);
        return pooled.length > 0 && own.length > 0 ? list : undefined;
      },
      { timeoutMs: 240_000, everyMs: 500 },
    );
    containersA = running.map((c) => c.Id);
    installationA = running[0]!.Labels[INSTALLATION]!;

    const backup = await svc(["self-host", "backup", file], { env: a.env });
    expect(backup.code, backup.stderr).toBe(0);
    for (const part of ["database", "repositories", "secrets key", "settings", "1 CR", "1 secret"]) {
      expect(backup.stderr).toContain(part);
    }
    expect(backup.stderr).toMatch(/wrote .*stack-backup\.tar\.gz \(\d+(\.\d)? (kB|MB)/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const listing = (await execa("tar", ["-tzf", file])).stdout;
    expect(listing).toContain("svc-backup/database/pglite.tar.gz");
    expect(listing).toContain(`svc-backup/repositories/${project}.bundle`);
    // Nothing of the original's identity: its admin token is not in the file.
    const unpacked = (await execa("bash", ["-c", `tar -xzOf '${file}' svc-backup/settings.json`])).stdout;
    expect(unpacked).not.toContain((await stateOf(a)).admin_token);
    expect(JSON.parse(unpacked).secrets_key).toBe((await stateOf(a)).secrets_key);

    // The file is never overwritten unasked; the file argument is required (usage: 2).
    expect((await svc(["self-host", "backup", file], { env: a.env })).code).toBe(1);
    expect((await svc(["self-host", "backup"], { env: a.env })).code).toBe(2);
  }, 360_000);

  it("restores into a fresh home only, as a new installation with a new admin token", async () => {
    const restored = await svc(["self-host", "restore", file], { env: b.env });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stderr).toContain("svc self-host start");
    // A second restore would overwrite data: refused unless --force.
    const again = await svc(["self-host", "restore", file], { env: b.env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("--force");
    expect((await svc(["self-host", "restore", join(a.dir, "missing.tar.gz")], { env: b.env })).code).toBe(1);

    const start = await svc(["self-host", "start", "--port", String(portB)], { env: b.env });
    expect(start.code, start.stderr).toBe(0);
    // A restore into a home whose stack runs is refused.
    expect((await svc(["self-host", "restore", file, "--force"], { env: b.env })).code).toBe(1);

    const stateA = await stateOf(a);
    const stateB = await stateOf(b);
    expect(stateB.admin_token).not.toBe(stateA.admin_token);
    expect(stateB.secrets_key).toBe(stateA.secrets_key);
    const idB = await installationAt(portB, stateB.admin_token);
    expect(idB.status).toBe(200);
    expect(idB.id).toBeDefined();
    expect(idB.id).not.toBe(installationA);
    expect((await installationAt(portA, stateA.admin_token)).id).toBe(installationA);
    // The original's admin token does not open the restored stack.
    expect((await installationAt(portB, stateA.admin_token)).status).toBe(401);
  }, 300_000);

  it("serves the same project, CR, secret and repository, and leaves the original's sandboxes alone", async () => {
    const crs = JSON.parse((await inB(["cr", "ls", "--json"])).stdout) as { number: number; title: string }[];
    expect(crs).toEqual([expect.objectContaining({ number: 1, title: "more words" })]);
    const merged = await inB(["cr", "merge", "1"]);
    expect(merged.code, merged.stderr).toBe(0);
    // Merged in the copy only.
    const inOriginal = JSON.parse((await inA(["cr", "show", "1", "--json"])).stdout);
    expect((inOriginal.change_request ?? inOriginal).status).toBe("open");

    // The original's session is a record here, its sandbox the original's: stopped in the copy.
    const copied = JSON.parse((await inB(["sessions", "info", sessionA, "--json"])).stdout);
    expect(copied.status).toBe("stopped");

    // A new session of the copy: the secret decrypts with the restored key; the workspace has the merged commit.
    const created = await inB(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    const sessionB = created.stdout.trim();
    const secret = await inB(["sessions", "exec", sessionB, "--", "sh", "-c", "echo $GREETING"]);
    expect(secret.code, secret.stderr).toBe(0);
    expect(secret.stdout.trim()).toBe("from-the-original");
    const work = await inB(["sessions", "exec", sessionB, "--", "cat", "more.txt"]);
    expect(work.code, work.stderr).toBe(0);
    expect(work.stdout.trim()).toBe("more");

    // The copy's sandboxes carry its own installation; the original's are all still there, running.
    const now = await projectContainers();
    for (const id of containersA) {
      expect(now.find((c) => c.Id === id)?.State, `the original's container ${id}`).toBe("running");
    }
    const sandboxB = now.find((c) => c.Labels["dev.svc.session"] === sessionB);
    expect(sandboxB?.Labels[INSTALLATION]).not.toBe(installationA);
    const info = JSON.parse((await inA(["sessions", "info", sessionA, "--json"])).stdout);
    expect(info.status).toBe("running");
  }, 360_000);
});
