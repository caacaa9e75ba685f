import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { RestorePlan } from "../../protocol/admin.ts";
import type { Sql } from "../db/sql.ts";
import { git } from "../git/run.ts";

/** Where `svc self-host restore` leaves its plan and bundles for the API's next start (protocol/admin.ts). */
export const restoreDir = (dataDir: string) => join(dataDir, "restore");

const REASON = "restored from a backup: its sandbox stayed with the original stack";

/** A managed repository again from its bundle: every ref, and HEAD on the branch it named. */
async function importRepository(reposDir: string, dir: string, repo: RestorePlan["repositories"][number]) {
  const target = join(reposDir, `${repo.project_id}.git`);
  // What an interrupted adoption left is made again from the bundle.
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true, mode: 0o700 });
  await git(["init", "--bare", "--quiet", target]);
  if (repo.refs > 0) {
    const bundle = join(dir, "repos", `${repo.project_id}.bundle`);
    await git(["fetch", "--quiet", bundle, "refs/*:refs/*"], { dir: target, timeoutMs: 15 * 60_000 });
  }
  await git(["symbolic-ref", "HEAD", repo.head], { dir: target });
}

/**
 * The first start on restored data (`svc self-host restore`): the repositories come back from their bundles, and
 * the stack becomes an installation of its own. Its id changes to the plan's, so its reconcilers and `stop` act on
 * its own containers only, never the original's (which still carry the old id); the original's sandboxes and apps
 * are forgotten (their rows keep no container id: nothing here removes or adopts them), its sessions stop, and the
 * original's admin token, sandbox tokens, clone credentials and browser sessions no longer work here. Done once,
 * in one transaction holding the installation row: a second API replica starting beside this one waits, then finds
 * the id changed and only tidies up. Returns whether this call adopted the data.
 */
export async function adoptRestoredData(options: {
  sql: Sql;
  dataDir: string;
  log: (msg: string, extra?: Record<string, unknown>) => void;
}): Promise<boolean> {
  const dir = restoreDir(options.dataDir);
  const file = join(dir, "restore.json");
  if (!existsSync(file)) return false;
  const parsed = RestorePlan.safeParse(JSON.parse(readFileSync(file, "utf8")));
  if (!parsed.success) throw new Error(`${file} is not a restore plan: ${parsed.error.issues[0]?.message}`);
  const plan = parsed.data;
  const adopted = await options.sql.transaction(async (tx) => {
    const [row] = await tx.query<{ id: string }>("select id::text as id from installation for update");
    if (row?.id === plan.installation) return false;
    if (row?.id !== plan.source_installation) {
      // Its repositories would be lost unseen: the start stops here instead.
      throw new Error(
        `${file} restores the data of installation ${plan.source_installation}, but the database is installation ` +
          `${row?.id}: restore the backup again ('svc self-host restore --force')`,
      );
    }
    const reposDir = join(options.dataDir, "repos");
    mkdirSync(reposDir, { recursive: true, mode: 0o700 });
    for (const repo of plan.repositories) await importRepository(reposDir, dir, repo);
    await tx.query("update installation set id = $1", [plan.installation]);
    await tx.query(
      `update tokens set revoked_at = now()
        where revoked_at is null
          and (name = 'self-host admin'
               or id in (select token_id from session_sandboxes where status in ('provisioning', 'active')))`,
    );
    await tx.query(
      `update session_sandboxes
          set status = case status when 'active' then 'stopped' else 'error' end,
              error = case status when 'active' then error else $1 end, updated_at = now(), stopped_at = now()
        where status in ('provisioning', 'active')`,
      [REASON],
    );
    await tx.query("update session_sandboxes set container_id = null where container_id is not null");
    await tx.query(
      `update project_sessions set status = case status when 'running' then 'stopped' else 'failed' end,
              error = $1, updated_at = now()
        where status in ('provisioning', 'running')`,
      [REASON],
    );
    // A live app's deploy without a container is re-created by this stack's app reconciler.
    await tx.query("update app_deploys set container_id = null where container_id is not null");
    await tx.query("delete from clone_credentials");
    await tx.query("delete from dashboard_sessions");
    await tx.query("delete from dashboard_sign_in_codes");
    return true;
  });
  if (adopted) {
    options.log("restored data adopted: a new installation", {
      installation: plan.installation,
      from: plan.source_installation,
      repositories: plan.repositories.length,
    });
  }
  rmSync(dir, { recursive: true, force: true });
  return adopted;
}
