import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, type seedUser, type TestApi } from "./support/api-server.ts";
import { cliHome, svc } from "./support/cli.ts";
import { databaseKinds, type TestDatabase } from "./support/databases.ts";
import { type TwoAccountApi, twoAccountApi } from "./support/no-sandboxes.ts";

/** Any unique prefix of 6 or more characters of a session id is accepted where an id is (DESIGN). */
describe.each(databaseKinds("pglite"))("session id prefixes (%s)", (kind) => {
  let stack: TwoAccountApi;
  let db: TestDatabase;
  let api: TestApi;
  let alice: Awaited<ReturnType<typeof seedUser>>;
  let bob: Awaited<ReturnType<typeof seedUser>>;
  let aliceProject: string;
  let bobProject: string;
  /** Eight hex characters two of Alice's sessions and one of Bob's start with. */
  const shared = randomBytes(4).toString("hex");
  const idOf = (n: number) => `${shared}-${n}000-4000-8000-000000000000`;
  const [one, two, bobs] = [idOf(1), idOf(2), idOf(3)];

  /** A session row with a chosen id, as the session store writes one (ids are otherwise random). */
  async function session(id: string, user: typeof alice, projectId: string) {
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, branch, base_ref, agent_name, created_by)
       values ($1, $2, $3, $1, 'main', 'build', $4)`,
      [id, user.accountId, projectId, user.userId],
    );
  }
  const get = (path: string, token = alice.token) => call(api.url, "GET", path, { token });
  const cli = (args: string[], token = alice.token) =>
    svc(args, { env: { ...cliHome().env, SVC_API_URL: `${api.url}/v1`, SVC_CLI_TOKEN: token } });

  beforeAll(async () => {
    stack = await twoAccountApi(kind);
    ({ db, api, alice, bob, aliceProject, bobProject } = stack);
    await session(one, alice, aliceProject);
    await session(two, alice, aliceProject);
    await session(bobs, bob, bobProject);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("a unique prefix reaches the session, in a project's routes and by the id alone", async () => {
    const unique = one.slice(0, 10);
    const inProject = await get(`/v1/projects/${aliceProject}/sessions/${unique}`);
    expect(inProject.status, JSON.stringify(inProject.body)).toBe(200);
    expect(inProject.body.session_id).toBe(one);
    expect((await get(`/v1/sessions/${unique}`)).body.session_id).toBe(one);
    // Bob's session shares the first eight characters, but only his own are searched for him.
    expect((await get(`/v1/sessions/${shared}`, bob.token)).body.session_id).toBe(bobs);
    expect((await get(`/v1/projects/${bobProject}/sessions/${shared}`, bob.token)).body.session_id).toBe(bobs);
  });

  it("an ambiguous prefix is 400 naming the candidates it may see; under six characters is no prefix", async () => {
    const ambiguous = await get(`/v1/sessions/${shared}`);
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.code).toBe("SESSION_ID_AMBIGUOUS");
    expect(ambiguous.body.error).toContain(one);
    expect(ambiguous.body.error).toContain(two);
    expect(ambiguous.body.error).not.toContain(bobs);
    expect((await get(`/v1/projects/${aliceProject}/sessions/${shared}`)).body.code).toBe("SESSION_ID_AMBIGUOUS");
    expect((await get(`/v1/sessions/${shared.slice(0, 5)}`)).body.code).toBe("SESSION_NOT_FOUND");
    // Another account's session by its prefix is unknown, exactly as an unknown id.
    const theirs = await get(`/v1/projects/${aliceProject}/sessions/${bobs.slice(0, 10)}`);
    expect(theirs.status).toBe(404);
  });

  it("the CLI takes a prefix; an ambiguous one exits 2 with the candidates", async () => {
    const info = await cli(["sessions", "info", one.slice(0, 14), "--json"]);
    expect(info.code, info.stderr).toBe(0);
    expect(JSON.parse(info.stdout).session_id).toBe(one);
    const ambiguous = await cli(["sessions", "info", shared]);
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toContain("SESSION_ID_AMBIGUOUS");
    expect(ambiguous.stderr).toContain(two);
  });
});
