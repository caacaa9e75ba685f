import { expect } from "vitest";
import { call } from "./api-server.ts";
import type { WorkRepo } from "./git-fixture.ts";

let landed = 0;

/**
 * Moves a project's default branch to the working copy's HEAD the only way there is: HEAD pushed to a branch of
 * its own, a CR from it, merged by a person. Returns the merged CR.
 */
export async function landOnDefault(
  apiUrl: string,
  token: string,
  projectId: string,
  repo: WorkRepo,
  title = "land",
): Promise<{ number: number; merge_commit_sha: string }> {
  const branch = `land/${process.pid}-${++landed}`;
  const pushed = await repo.push(`HEAD:refs/heads/${branch}`);
  expect(pushed.code, pushed.stderr).toBe(0);
  const crs = `/v1/projects/${projectId}/change-requests`;
  const opened = await call(apiUrl, "POST", crs, { token, body: { title, head_ref: branch } });
  expect(opened.status, JSON.stringify(opened.body)).toBe(201);
  const merged = await call(apiUrl, "POST", `${crs}/${opened.body.cr_id}/merge`, { token, body: {} });
  expect(merged.status, JSON.stringify(merged.body)).toBe(200);
  return merged.body;
}
