import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseManifest } from "../api/manifest/parse.ts";
import { manifest as scaffoldManifest } from "../cli/scaffold/templates.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";

describe.each(databaseKinds("pglite"))("the manifest in force is the default branch's (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  let work: WorkRepo;
  let env: CliEnv;
  let counter = 0;

  const projectPath = (suffix: string) => `/v1/projects/${projectId}${suffix}`;
  const req = (method: string, suffix: string, body?: unknown) =>
    call(api.url, method, projectPath(suffix), { token: user.token, body });
  const ls = async () => {
    const res = await svc(["secrets", "ls", "--json"], { env, cwd: work.dir });
    expect(res.code, res.stderr).toBe(0);
    return { ...res, json: JSON.parse(res.stdout) };
  };
  const row = (json: { secrets: { name: string }[] }, name: string) => json.secrets.find((s) => s.name === name);

  /** A branch off main's tip with svc.toml as given, pushed; returns its name. */
  async function branchWith(toml: string) {
    counter += 1;
    const name = `manifest-${counter}`;
    await work.git(["fetch", "-q", "origin"]);
    await work.checkout(name, { create: true, from: "origin/main" });
    await work.commit(`svc.toml ${counter}`, { "svc.toml": toml });
    await work.pushed(name);
    return name;
  }

  async function mergeViaCr(head: string) {
    const opened = await req("POST", "/change-requests", { title: `manifest ${head}`, head_ref: head });
    expect(opened.status, JSON.stringify(opened.body)).toBe(201);
    const merged = await req("POST", `/change-requests/${opened.body.cr_id}/merge`);
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
  }

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Manifested" } });
    projectId = created.body.id;
    work = await workRepo(authedUrl(created.body.repo_url, user.token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
    env = { ...cliHome().env, SVC_CLI_TOKEN: user.token, SVC_API_URL: `${api.url}/v1`, SVC_PROJECT_ID: projectId };
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("no svc.toml on main: empty env, no error", async () => {
    const res = await req("GET", "/secrets");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ secrets: [], env: {}, manifest_error: null });
    expect(res.body.manifest_commit).toMatch(/^[0-9a-f]{40}$/);
  });

  it("a manifest on a branch has no effect until its CR merges", async () => {
    const head = await branchWith(
      '[project]\nname = "m"\n\n[env]\nOPENAI_API_KEY = { required = true, description = "model key" }\nSENTRY_DSN = "errors"\n',
    );
    // The working copy holds that manifest too: the CLI must not read it.
    const before = await ls();
    expect(row(before.json, "OPENAI_API_KEY")).toBeUndefined();
    expect(before.json.manifest_error).toBeNull();

    await mergeViaCr(head);
    const after = await ls();
    expect(row(after.json, "OPENAI_API_KEY")).toMatchObject({ set: false, required: true });
    expect(row(after.json, "SENTRY_DSN")).toMatchObject({ set: false, required: false });
    const table = await svc(["secrets", "ls"], { env, cwd: work.dir });
    expect(table.stdout).toMatch(/OPENAI_API_KEY\tMISSING \(required\)/);
    expect(table.stderr).not.toContain("svc.toml");
    const listed = await req("GET", "/secrets");
    expect(listed.body.env).toEqual({
      OPENAI_API_KEY: { required: true, description: "model key" },
      SENTRY_DSN: { required: false, description: "errors" },
    });
  });

  it("an invalid manifest merged keeps the last good env and reports its error with the line", async () => {
    const head = await branchWith(
      '[env]\nNEW_KEY = { required = true }\n\n[[triggers]]\nslug = "nightly"\nschedule = "0 3 * *"\nprompt = "go"\n',
    );
    await mergeViaCr(head);
    const res = await req("GET", "/secrets");
    expect(res.body.env).toHaveProperty("OPENAI_API_KEY");
    expect(res.body.env).not.toHaveProperty("NEW_KEY");
    expect(res.body.manifest_error).toMatchObject({ line: 6, key: "triggers[0].schedule" });

    const listed = await ls();
    expect(row(listed.json, "OPENAI_API_KEY")).toMatchObject({ required: true });
    expect(listed.json.manifest_error).toMatchObject({ line: 6, key: "triggers[0].schedule" });
    expect(listed.stderr).toContain("line 6");

    const read = await api.services.manifests.read((await api.services.projects.byId(projectId))!);
    expect(read.error?.key).toBe("triggers[0].schedule");
    expect(Object.keys(read.manifest.env).sort()).toEqual(["OPENAI_API_KEY", "SENTRY_DSN"]);
    const [stored] = await db.sql.query<{ error: { line: number }; manifest: { env: object } }>(
      "select error, manifest from project_manifests where project_id = $1",
      [projectId],
    );
    expect(stored!.error.line).toBe(6);
    expect(Object.keys(stored!.manifest.env).sort()).toEqual(["OPENAI_API_KEY", "SENTRY_DSN"]);
  });

  it("the last good manifest is shared with another replica and survives a restart", async () => {
    // A second API process on the same database and repositories: nothing of the first one's memory.
    const replica = await startApi(db.sql, { dataDir: api.dataDir });
    try {
      const res = await call(replica.url, "GET", projectPath("/secrets"), { token: user.token });
      expect(Object.keys(res.body.env).sort()).toEqual(["OPENAI_API_KEY", "SENTRY_DSN"]);
      expect(res.body.manifest_error).toMatchObject({ line: 6, key: "triggers[0].schedule" });
    } finally {
      await replica.close();
    }
  });

  it("a TOML syntax error is reported with its line; fixing it takes effect", async () => {
    await mergeViaCr(await branchWith("[env]\nBROKEN = \n"));
    expect((await req("GET", "/secrets")).body.manifest_error).toMatchObject({ line: 2, key: null });
    await mergeViaCr(await branchWith("[env]\nFIXED = { required = true }\n"));
    const res = await req("GET", "/secrets");
    expect(res.body).toMatchObject({ env: { FIXED: { required: true } }, manifest_error: null });
  });
});

describe("svc init's manifest", () => {
  it("parses, and so do its commented [[triggers]] and [[apps]] examples once uncommented", () => {
    const text = scaffoldManifest("demo");
    expect(parseManifest(text)).toMatchObject({ manifest: { project: { name: "demo" }, triggers: [] } });
    const uncommented = text.replace(/^# (\[\[triggers\]\]|\[\[apps\]\]|[a-z_]+ = .*)$/gm, "$1");
    expect(uncommented).toContain("\n[[triggers]]\n");
    expect(uncommented).toContain("\n[[apps]]\n");
    expect(parseManifest(uncommented)).toMatchObject({
      manifest: {
        triggers: [{ slug: "nightly-deps", schedule: "0 3 * * *", enabled: true }],
        apps: [{ name: "web", build: ".svc/Dockerfile", context: ".", port: 3000, health_path: "/" }],
      },
    });
  });
});
