import { randomUUID } from "node:crypto";
import type { Sql } from "../../api/db/sql.ts";
import type { Services } from "../../api/services.ts";
import { hashSecret, newSecret } from "../../protocol/credential.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { type WorkRepo, workRepo } from "./git-fixture.ts";

/**
 * A session with a live sandbox, as the orchestrator records one, without a container: its row, its sandbox's row
 * with a service key and, when asked, its own session token (SVC_CLI_TOKEN). For suites that test what such
 * credentials may do, not how sandboxes start.
 */
export async function seedLiveSandbox(
  sql: Sql,
  owner: { userId: string; accountId: string },
  projectId: string,
  options: { baseRef?: string; tokens?: Services["tokens"] } = {},
): Promise<{ sessionId: string; sandboxId: string; serviceKey: string; sessionToken?: string }> {
  const sessionId = randomUUID();
  await sql.query(
    `insert into project_sessions (session_id, account_id, project_id, branch, base_ref, agent_name, created_by)
     values ($1, $2, $3, $1, $4, 'build', $5)`,
    [sessionId, owner.accountId, projectId, options.baseRef ?? "main", owner.userId],
  );
  const token = await options.tokens?.mint({
    userId: owner.userId,
    projectId,
    sessionId,
    name: `session ${sessionId}`,
  });
  const serviceKey = newSecret(SERVICE_KEY_PREFIX);
  const [row] = await sql.query<{ sandbox_id: string }>(
    `insert into session_sandboxes (session_id, project_id, status, service_key_hash, token_id)
     values ($1, $2, 'active', $3, $4) returning sandbox_id`,
    [sessionId, projectId, hashSecret(serviceKey), token?.id ?? null],
  );
  return { sessionId, sandboxId: row!.sandbox_id, serviceKey, sessionToken: token?.token };
}

/** A working copy of `url` on branch `work`, cut from the session's branch: where a sandbox's commits start. */
export async function sessionClone(url: string, sessionId: string): Promise<WorkRepo> {
  const repo = await workRepo(url);
  await repo.git(["fetch", "-q", "origin"]);
  await repo.checkout("work", { create: true, from: `origin/${sessionId}` });
  return repo;
}
