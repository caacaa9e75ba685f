import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { git } from "../../api/git/run.ts";
import { call, seedUser, startApi } from "../harness/api-server.ts";
import { freshDatabase } from "../harness/databases.ts";
import { authedUrl } from "../harness/git-fixture.ts";
import { HISTORY_COMMITS, historyFixture } from "./history-fixture.ts";
import { ms, percentile } from "./stats.ts";

const RUNS = 3;

/**
 * A sandbox's clone of a repository with history through the API's git endpoint: every branch with every file's
 * every version (what sandboxes did) against the session branch and its base without old contents (what the
 * daemon does now, daemon/workspace.ts), run in turn.
 */
export async function benchSandboxClone() {
  const fixture = await historyFixture();
  const db = await freshDatabase("pglite");
  const api = await startApi(db.sql);
  try {
    const user = await seedUser(api.services);
    const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "history" } }))
      .body;
    await git(["push", "--quiet", "--mirror", api.services.repos.managedDir(project.id)], { dir: fixture.dir });
    const url = authedUrl(project.repo_url, user.token);
    const clone = async (narrow: boolean) => {
      const dir = mkdtempSync(join(tmpdir(), "svc-bench-clone-"));
      const start = performance.now();
      if (narrow) {
        await git(["clone", "-q", "--filter=blob:none", "--single-branch", "--no-tags", "--branch", "head", url, dir]);
        await git(["remote", "set-branches", "--add", "origin", "main"], { dir });
        await git(["fetch", "-q", "origin", "main"], { dir });
      } else {
        await git(["clone", "-q", "--branch", "head", url, dir]);
      }
      const took = performance.now() - start;
      const kb = Number(
        execFileSync("du", ["-sk", join(dir, ".git")])
          .toString()
          .split("\t")[0],
      );
      rmSync(dir, { recursive: true, force: true });
      return { took, kb };
    };
    const full: { took: number; kb: number }[] = [];
    const narrow: { took: number; kb: number }[] = [];
    for (let i = 0; i < RUNS; i++) {
      full.push(await clone(false));
      narrow.push(await clone(true));
    }
    const p50 = (runs: { took: number }[]) =>
      percentile(
        runs.map((r) => r.took),
        50,
      );
    const ratio = p50(full) / p50(narrow);
    return {
      ok: ratio > 1,
      line: `sandbox clone of ${HISTORY_COMMITS} commits (${RUNS} runs each): every branch and version p50 ${ms(p50(full))} ms, ${full[0]!.kb} kB | session branch + base, contents on demand p50 ${ms(p50(narrow))} ms, ${narrow[0]!.kb} kB | ${ratio.toFixed(1)}x faster, ${(full[0]!.kb / narrow[0]!.kb).toFixed(1)}x smaller`,
    };
  } finally {
    await api.close();
    await db.drop();
  }
}
