import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, GIT_ENV, type WorkRepo, workRepo } from "../support/git-fixture.ts";

const LIMIT = "SVC_GIT_MAX_PUSH_MB (1 MB)";

/** SVC_GIT_MAX_PUSH_MB against real git pushes over smart HTTP: refused with the limit named, nothing written. */
describe("push size limit (SVC_GIT_MAX_PUSH_MB=1)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };
  let repo: WorkRepo;
  let bigBlob: string;

  const managed = () => api.services.repos.managedDir(project.id);
  const branch = async (name: string) =>
    (await git(["rev-parse", "--verify", "-q", `refs/heads/${name}`], { dir: managed(), okCodes: [1] })).stdout.trim();
  const hasObject = async (sha: string) =>
    (await git(["cat-file", "-e", sha], { dir: managed(), okCodes: [1, 128] })).exitCode === 0;
  /** git's quarantine directories of pushes under way; a stopped receive-pack removes its own as it exits. */
  async function quarantinesLeft(): Promise<string[]> {
    const left = () => readdirSync(join(managed(), "objects")).filter((d) => d.startsWith("incoming-"));
    for (let i = 0; i < 50 && left().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    return left();
  }

  /** `git push` with extra config, and the HTTP headers it sent (GIT_TRACE_CURL), to know how the body went. */
  async function push(config: string[], refspec: string) {
    const trace = join(mkdtempSync(join(tmpdir(), "svc-trace-")), "curl");
    const r = await execa("git", [...config.flatMap((c) => ["-c", c]), "push", "origin", refspec], {
      cwd: repo.dir,
      env: { ...GIT_ENV, GIT_TRACE_CURL: trace, GIT_TRACE_CURL_NO_DATA: "1" },
      reject: false,
    });
    const sent = readFileSync(trace, "utf8")
      .split("\n")
      .filter((l) => l.includes("=> Send header"));
    return { code: r.exitCode, stderr: r.stderr, headers: sent.join("\n") };
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql, { gitMaxPushMb: 1 });
    alice = await seedUser(api.services, "alice");
    project = (await call(api.url, "POST", "/v1/projects", { token: alice.token, body: { name: "Pushes" } })).body;
    repo = await workRepo(authedUrl(project.repo_url, alice.token));
    await repo.commit("initial", { "README.md": "hello\n" });
    await repo.pushed("main");
    // 3 MB that no compression shrinks: the pack is as large as the file.
    await repo.checkout("big", { create: true });
    await repo.commit("big", { "big.bin": randomBytes(3 * 1024 * 1024) });
    bigBlob = (await repo.git(["rev-parse", "HEAD:big.bin"])).stdout.trim();
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("refuses a push whose Content-Length passes the limit before git runs; git prints the limit and the setting", async () => {
    const refused = await push(["http.postBuffer=104857600"], "big:refs/heads/big-declared");
    expect(refused.headers).toMatch(/Content-Length: \d{7}/);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`remote: error: this push is larger than 1 MB`);
    expect(refused.stderr).toContain(`[remote rejected] big -> big-declared (push exceeds ${LIMIT})`);
    expect(await branch("big-declared")).toBe("");
    expect(await hasObject(bigBlob)).toBe(false);
  });

  it("cuts off a chunked push once its bytes pass the limit: git is stopped, no ref moves, no object stays", async () => {
    const refused = await push([], "big:refs/heads/big-streamed");
    expect(refused.headers).toContain("Transfer-Encoding: chunked");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`[remote rejected] big -> big-streamed (push exceeds ${LIMIT})`);
    expect(refused.stderr).toContain("SVC_GIT_MAX_PUSH_MB");
    expect(await branch("big-streamed")).toBe("");
    expect(await hasObject(bigBlob)).toBe(false);
    expect(await quarantinesLeft()).toEqual([]);
  });

  it("lets a push under the limit through", async () => {
    await repo.checkout("small", { create: true, from: "main" });
    const tip = await repo.commit("small", { "small.txt": "x".repeat(1000) });
    await repo.pushed("small");
    expect(await branch("small")).toBe(tip);
  });

  it("a gzip body that inflates past the limit is refused by git itself (receive.maxInputSize)", async () => {
    // A pack stored without compression: 3 MB of zeros that gzip squeezes to a few KB on the wire.
    await repo.checkout("zeros", { create: true, from: "main" });
    const tip = await repo.commit("zeros", { "zeros.bin": Buffer.alloc(3 * 1024 * 1024) });
    const pack = await execa("git", ["-c", "pack.compression=0", "pack-objects", "--stdout", "--revs"], {
      cwd: repo.dir,
      env: GIT_ENV,
      input: `${tip}\n^main\n`,
      encoding: "buffer",
    });
    const command = `${"0".repeat(40)} ${tip} refs/heads/zeros\0report-status side-band-64k\n`;
    const body = gzipSync(
      Buffer.concat([
        Buffer.from((command.length + 4).toString(16).padStart(4, "0") + command),
        Buffer.from("0000"),
        pack.stdout,
      ]),
    );
    expect(body.length).toBeLessThan(1024 * 1024);
    const answer = await new Promise<string>((resolve, reject) => {
      const req = request(
        `${project.repo_url}/git-receive-pack`,
        {
          method: "POST",
          headers: {
            authorization: `Basic ${Buffer.from(`x:${alice.token}`).toString("base64")}`,
            "content-type": "application/x-git-receive-pack-request",
            "content-encoding": "gzip",
          },
        },
        (res) => {
          let text = "";
          res.setEncoding("latin1");
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve(text));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    expect(answer).toContain("pack exceeds maximum allowed size");
    expect(await branch("zeros")).toBe("");
    expect(await quarantinesLeft()).toEqual([]);
  });
});
