import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import type { Project } from "../protocol/project.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { type GitServer, hostedRepository } from "./support/git-server.ts";

const MANIFEST = `# nightly work
[[triggers]]
slug = "nightly"
schedule = "0 3 * * *"   # 03:00
timezone = "Europe/Berlin"
prompt = "Upgrade the dependencies"
agent = "build"
`;

describe("triggers of an external repository (real git host)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let server: GitServer;
  let origin: string;
  let project: Project;

  const tip = async (branch: string) =>
    (await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], { dir: origin, okCodes: [1] })).stdout.trim();
  const triggers = (suffix = "", method = "GET") =>
    call(api.url, method, `/v1/projects/${project.id}/triggers${suffix}`, { token: user.token });

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const hosted = await hostedRepository("up.git", { defaultBranch: "trunk" });
    ({ server, origin } = hosted);
    const dev = hosted.dev;
    await dev.commit("manifest", { "svc.toml": MANIFEST });
    await dev.pushed("trunk");
    project = (
      await call(api.url, "POST", "/v1/projects", {
        token: user.token,
        body: { name: "Up", repo_url: `${server.url}/up.git`, default_branch: "trunk" },
      })
    ).body;
  });
  afterAll(async () => {
    await api?.close();
    await server?.close();
    await db?.drop();
  });

  it("lists the default branch's triggers, disables one through a pushed branch and a CR, never writing trunk", async () => {
    const list = await triggers();
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      manifest_error: null,
      triggers: [
        {
          slug: "nightly",
          schedule: "0 3 * * *",
          timezone: "Europe/Berlin",
          prompt: "Upgrade the dependencies",
          enabled: true,
          base_ref: null,
          agent: "build",
          last_fired_at: null,
          last_session_id: null,
          last_error: null,
          last_refused_at: null,
          last_refusal: null,
        },
      ],
    });
    const trunk = await tip("trunk");
    const res = await triggers("/nightly/disable", "POST");
    expect(res.status).toBe(201);
    const cr = res.body.change_request;
    expect(cr).toMatchObject({ head_ref: "svc/trigger-nightly-disabled-1", base_ref: "trunk", status: "open" });
    expect(await tip("trunk")).toBe(trunk);
    expect(await tip(cr.head_ref)).toBe(cr.head_commit_sha);
    expect((await triggers("/nightly")).body.enabled).toBe(true);

    // A second request while the first CR is open gets the next branch name.
    expect((await triggers("/nightly/disable", "POST")).body.change_request.head_ref).toBe(
      "svc/trigger-nightly-disabled-2",
    );
    const merged = await call(api.url, "POST", `/v1/projects/${project.id}/change-requests/${cr.number}/merge`, {
      token: user.token,
      body: {},
    });
    expect(merged.status).toBe(200);
    expect((await git(["show", "trunk:svc.toml"], { dir: origin })).stdout).toBe(
      MANIFEST.replace('slug = "nightly"\n', 'slug = "nightly"\nenabled = false\n'),
    );
    expect((await triggers("/nightly")).body.enabled).toBe(false);
    expect((await triggers("/nightly/disable", "POST")).body.code).toBe("TRIGGER_UNCHANGED");
    expect((await triggers("/nope/enable", "POST")).body.code).toBe("TRIGGER_NOT_FOUND");
    // No sandbox driver on this server: firing answers 503.
    expect((await triggers("/nightly/fire", "POST")).status).toBe(503);
    expect((await triggers("/nightly")).body.last_error).toBeNull();
  });
});
