import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, renameSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createTipsCache, tipHolds } from "./refs.ts";

const TTL_MS = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function bareRepo() {
  const dir = mkdtempSync(join(tmpdir(), "svc-refs-"));
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", dir, ...args], {
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: "t",
        GIT_AUTHOR_EMAIL: "t@t",
        GIT_COMMITTER_NAME: "t",
        GIT_COMMITTER_EMAIL: "t@t",
      },
    })
      .toString()
      .trim();
  git("init", "-q", "--bare", "-b", "main");
  const tree = git("hash-object", "-t", "tree", "-w", "--stdin");
  const one = git("commit-tree", tree, "-m", "one");
  const two = git("commit-tree", tree, "-p", one, "-m", "two");
  git("update-ref", "refs/heads/main", one);
  git("update-ref", "refs/heads/feature/x", one);
  return { dir, git, one, two };
}

/** Makes every ref file and directory look written long ago, as in a repository nobody pushed to lately. */
function age(dir: string): void {
  const old = new Date(Date.now() - 60_000);
  const walk = (path: string) => {
    utimesSync(path, old, old);
    if (statSync(path).isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(join(dir, "refs"));
  try {
    utimesSync(join(dir, "packed-refs"), old, old);
  } catch {
    // not packed yet
  }
}

describe("the branch tips cache", () => {
  it("answers a fresh read (TTL 0) with a branch another replica pushed a moment ago, which a cached read misses", async () => {
    const repo = bareRepo();
    const cache = createTipsCache({ ttlMs: 60_000 });
    expect((await cache.get(repo.dir)).has("ship/new")).toBe(false);
    // Another process writes the ref: this cache's invalidate is never called.
    repo.git("update-ref", "refs/heads/ship/new", repo.two);
    expect((await cache.get(repo.dir)).has("ship/new")).toBe(false);
    expect((await cache.get(repo.dir, 0)).get("ship/new")).toBe(repo.two);
  });

  it("serves unchanged refs past the TTL without running git", async () => {
    const repo = bareRepo();
    const cache = createTipsCache({ ttlMs: TTL_MS });
    age(repo.dir);
    expect(await cache.get(repo.dir)).toEqual(
      new Map([
        ["feature/x", repo.one],
        ["main", repo.one],
      ]),
    );
    // git no longer recognises the directory as a repository: only a cached answer can still come back.
    renameSync(join(repo.dir, "HEAD"), join(repo.dir, "HEAD.away"));
    await sleep(TTL_MS * 2);
    expect((await cache.get(repo.dir)).get("main")).toBe(repo.one);
  });

  it("sees a branch moved behind its back once the TTL passed: loose, nested, packed or deleted", async () => {
    const repo = bareRepo();
    const cache = createTipsCache({ ttlMs: TTL_MS });
    const readAfterTtl = async () => {
      await sleep(TTL_MS * 2);
      return cache.get(repo.dir);
    };
    age(repo.dir);
    await cache.get(repo.dir);

    repo.git("update-ref", "refs/heads/feature/x", repo.two);
    expect((await readAfterTtl()).get("feature/x")).toBe(repo.two);

    repo.git("pack-refs", "--all");
    age(repo.dir);
    await readAfterTtl();
    repo.git("update-ref", "-d", "refs/heads/feature/x");
    expect(await readAfterTtl()).toEqual(new Map([["main", repo.one]]));

    age(repo.dir);
    await readAfterTtl();
    repo.git("update-ref", "refs/heads/main", repo.two);
    expect((await readAfterTtl()).get("main")).toBe(repo.two);
  });
});

describe("tipHolds", () => {
  it("holds the tip itself and its ancestors, not a descendant, a stranger or a missing object", async () => {
    const repo = bareRepo();
    const stranger = repo.git("commit-tree", repo.git("hash-object", "-t", "tree", "-w", "--stdin"), "-m", "other");
    expect(await tipHolds(repo.dir, repo.two, repo.two)).toBe(true);
    expect(await tipHolds(repo.dir, repo.two, repo.one)).toBe(true);
    expect(await tipHolds(repo.dir, repo.one, repo.two)).toBe(false);
    expect(await tipHolds(repo.dir, repo.two, stranger)).toBe(false);
    expect(await tipHolds(repo.dir, repo.two, "1".repeat(40))).toBe(false);
  });
});
