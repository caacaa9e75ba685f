import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, GIT_ENV, workRepo } from "./support/git-fixture.ts";
import { waitFor } from "./support/wait.ts";

/** The processes whose working directory is the repository: http-backend's children (upload-pack, pack-objects). */
function gitProcessesIn(dir: string): { pid: number; command: string }[] {
  const found: { pid: number; command: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readlinkSync(`/proc/${entry}/cwd`).startsWith(dir)) continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim();
      found.push({ pid: Number(entry), command });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

describe("git's processes end with the request (real git clients, a real API)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };
  let dir: string;

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Slow pack" } })).body;
    // Many near-copies of one blob, packed with a wide delta window on one thread: upload-pack's pack-objects
    // computes for many seconds before it writes a byte, as it does for a large repository with history.
    const base = randomBytes(60_000);
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < 400; i++) {
      const copy = Buffer.from(base);
      for (let j = 0; j < 200; j++) copy[(i * 7919 + j * 104_729) % copy.length] = (i + j) % 256;
      files[`f${i}.bin`] = copy;
    }
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.commit("near-copies", files);
    expect((await repo.push("main")).code).toBe(0);
    dir = api.services.repos.managedDir(project.id);
    // Stored whole (the push arrived deltified, and upload-pack would reuse those deltas as they are).
    await git(["repack", "-a", "-d", "-F", "--window=0"], { dir });
    await git(["config", "pack.window", "250"], { dir });
    await git(["config", "pack.threads", "1"], { dir });
    // Silent while it computes, as pack-objects is while it counts a large history: no keep-alive write that would
    // make a pipe's broken end stop it.
    await git(["config", "uploadpack.keepAlive", "0"], { dir });
  }, 120_000);
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("a clone killed while the server packs leaves no git process of the repository 5 s later", async () => {
    const clone = execa(
      "git",
      ["clone", "-q", authedUrl(project.repo_url, user.token), join(tmpdir(), `c-${Date.now()}`)],
      {
        env: GIT_ENV,
        reject: false,
        // Its own group: the kill takes git-remote-http (which holds the connection) with it, as a dead machine would.
        detached: true,
      },
    );
    const packing = await waitFor(
      "pack-objects to run for the clone",
      async () => gitProcessesIn(dir).find((p) => p.command.includes("pack-objects")),
      { timeoutMs: 30_000, everyMs: 50 },
    );
    expect(packing.command).toContain("pack-objects");
    process.kill(-clone.pid!, "SIGKILL");
    await clone;
    await new Promise((r) => setTimeout(r, 5000));
    expect(gitProcessesIn(dir)).toEqual([]);
    // The repository still serves: a fetch of one ref after the kill works.
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    const ls = await repo.git(["ls-remote", "origin", "main"]);
    expect(ls.stdout).toMatch(/^[0-9a-f]{40}\trefs\/heads\/main$/);
  }, 60_000);
});
