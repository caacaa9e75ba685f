import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../api/app.ts";
import { git } from "../api/git/run.ts";
import { call, seedUser, startApi, TEST_REPO_ALLOWED_HOSTS, type TestApi } from "./support/api-server.ts";
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
    await repo.pushed("main");
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

  it("a client that stalls, its request sent and the answer never read, loses git's processes at the deadline", async () => {
    // A replica of the API over the same repositories, its git requests ending after 3 s (startApi takes no deadline).
    const deadlineMs = 3000;
    let url = "";
    const { app } = await buildApp({
      sql: db.sql,
      dataDir: api.dataDir,
      publicUrl: () => url,
      logLevel: "silent",
      secretsKey: randomBytes(32).toString("base64"),
      repoAllowedHosts: TEST_REPO_ALLOWED_HOSTS,
      gitRequestDeadlineMs: deadlineMs,
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const port = (app.server.address() as AddressInfo).port;
    url = `http://127.0.0.1:${port}`;
    const repoPath = new URL(project.repo_url).pathname;
    try {
      // As git does: the refs first (protocol v0), then one upload-pack request wanting the tip.
      const refs = await fetch(`${url}${repoPath}/info/refs?service=git-upload-pack`, {
        headers: { authorization: `Bearer ${user.token}` },
      });
      expect(refs.status).toBe(200);
      const tip = /([0-9a-f]{40}) refs\/heads\/main/.exec(await refs.text())?.[1];
      expect(tip).toBeDefined();
      const body = `0032want ${tip}\n00000009done\n`;
      const socket = connect(port, "127.0.0.1");
      socket.on("error", () => {});
      await new Promise<void>((resolve) => socket.once("connect", resolve));
      const sentAt = Date.now();
      // Sent whole; then the client neither reads (no data listener: the socket stays paused) nor closes. The API stops
      // reading git's answer when the client does, so git blocks on its write for ever: only the deadline ends it.
      socket.write(
        [
          `POST ${repoPath}/git-upload-pack HTTP/1.1`,
          `Host: 127.0.0.1:${port}`,
          `Authorization: Bearer ${user.token}`,
          "Content-Type: application/x-git-upload-pack-request",
          "Accept: application/x-git-upload-pack-result",
          `Content-Length: ${Buffer.byteLength(body)}`,
          "",
          body,
        ].join("\r\n"),
      );
      try {
        await waitFor(
          "pack-objects to run for the stalled client",
          async () => gitProcessesIn(dir).find((p) => p.command.includes("pack-objects")),
          { timeoutMs: deadlineMs, everyMs: 50 },
        );
        expect(Date.now() - sentAt).toBeLessThan(deadlineMs);
        await waitFor("no git process of the repository", async () => gitProcessesIn(dir).length === 0 || undefined, {
          timeoutMs: sentAt + deadlineMs + 3000 - Date.now(),
          everyMs: 100,
        });
        expect(gitProcessesIn(dir)).toEqual([]);
      } finally {
        socket.destroy();
      }
      // The API still serves the repository after ending the stalled request.
      const repo = await workRepo(authedUrl(`${url}${repoPath}`, user.token));
      const ls = await repo.git(["ls-remote", "origin", "main"]);
      expect(ls.stdout).toMatch(/^[0-9a-f]{40}\trefs\/heads\/main$/);
    } finally {
      await app.close();
    }
  }, 60_000);
});
