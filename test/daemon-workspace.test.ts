import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { headCommit } from "../daemon/workspace.ts";
import { GIT_ENV } from "./support/git-fixture.ts";

describe("the daemon's view of its workspace (real git)", () => {
  it("reads HEAD on a branch, after refs are packed, detached, and on an unborn branch", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-head-"));
    const git = async (...args: string[]) => (await execa("git", args, { cwd: dir, env: GIT_ENV })).stdout.trim();
    await git("init", "-q", "-b", "main");
    expect(await headCommit(dir)).toBeNull();
    await git("commit", "-q", "--allow-empty", "-m", "one");
    const one = await git("rev-parse", "HEAD");
    expect(await headCommit(dir)).toBe(one);
    await git("pack-refs", "--all");
    expect(await headCommit(dir)).toBe(one);
    await git("commit", "-q", "--allow-empty", "-m", "two");
    const two = await git("rev-parse", "HEAD");
    expect(await headCommit(dir)).toBe(two);
    await git("checkout", "-q", "--detach", one);
    expect(await headCommit(dir)).toBe(one);
    expect(await headCommit(join(dir, "nowhere"))).toBeNull();
  });
});
