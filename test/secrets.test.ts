import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDotenv } from "../cli/dotenv.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";

describe("project secrets: API and CLI", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  let env: CliEnv;
  let cwd: string;
  let repoUrl: string;

  const secrets = (method: string, body?: unknown) =>
    call(api.url, method, `/v1/projects/${projectId}/secrets`, { token: user.token, body });

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    const created = await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Secretive" } });
    projectId = created.body.id;
    repoUrl = authedUrl(created.body.repo_url, user.token);
    cwd = mkdtempSync(join(tmpdir(), "svc-secrets-"));
    env = { ...cliHome().env, SVC_CLI_TOKEN: user.token, SVC_API_URL: `${api.url}/v1`, SVC_PROJECT_ID: projectId };
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("stores values encrypted, lists names only and bumps the revision on every write", async () => {
    const set = await secrets("PUT", { secrets: { DB_PASSWORD: "hunter2-plaintext", TOKEN_B: "b" } });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ names: ["DB_PASSWORD", "TOKEN_B"], revision: 1 });
    const list = await secrets("GET");
    expect(list.body.secrets.map((s: { name: string }) => s.name)).toEqual(["DB_PASSWORD", "TOKEN_B"]);
    expect(JSON.stringify(list.body)).not.toContain("hunter2");
    const stored = await db.sql.query<{ value_enc: string }>("select value_enc from project_secrets");
    expect(JSON.stringify(stored)).not.toContain("hunter2");
    expect((await api.services.secrets.values(projectId)).values.DB_PASSWORD).toBe("hunter2-plaintext");
    expect((await secrets("DELETE", { names: ["TOKEN_B"] })).body).toEqual({ removed: ["TOKEN_B"], revision: 2 });
  });

  it("refuses the reserved SVC_ prefix and bad names with 400, changing nothing", async () => {
    for (const name of ["SVC_TOKEN", "svc_lower", "1BAD", "WITH-DASH"]) {
      const res = await secrets("PUT", { secrets: { [name]: "x" } });
      expect(res.status, name).toBe(400);
      expect(res.body.error).toMatch(/reserved|letters/);
    }
    expect((await secrets("GET")).body.revision).toBe(2);
  });

  it("sets from the CLI, reading NAME=- from stdin, and never prints values", async () => {
    const res = await svc(["secrets", "set", "FROM_STDIN=-", "PLAIN=value-on-argv"], {
      env,
      cwd,
      input: "piped-secret\n",
    });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout + res.stderr).not.toContain("piped-secret");
    expect((await api.services.secrets.values(projectId)).values.FROM_STDIN).toBe("piped-secret");
    expect((await svc(["secrets", "set", "SVC_NOPE=x"], { env, cwd })).code).toBe(1);
    const bare = await svc(["secrets", "set", "OK=1", "sk-live-forgot-the-name"], { env, cwd });
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("argument 2 is not NAME=VALUE");
    expect(bare.stderr + bare.stdout).not.toContain("sk-live-forgot-the-name");
  });

  it("lists names with the default branch manifest's required-but-missing ones marked", async () => {
    const work = await workRepo(repoUrl);
    await work.commit("manifest", {
      "svc.toml": "[env]\nOPENAI_API_KEY = { required = true }\nDB_PASSWORD = { required = true }\n",
    });
    await work.pushed("main");
    const ls = await svc(["secrets", "ls"], { env, cwd });
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(/OPENAI_API_KEY\tMISSING \(required\)/);
    expect(ls.stdout).toMatch(/DB_PASSWORD\tset/);
    expect(ls.stdout).not.toContain("hunter2");
    const json = JSON.parse((await svc(["secrets", "ls", "--json"], { env, cwd })).stdout);
    expect(json.secrets.find((s: { name: string }) => s.name === "OPENAI_API_KEY")).toMatchObject({
      set: false,
      required: true,
    });
  });

  it("pulls a names-only skeleton without clobbering, and pushes a dotenv file", async () => {
    const pull = await svc(["env", "pull"], { env, cwd });
    expect(pull.code, pull.stderr).toBe(0);
    const skeleton = readFileSync(join(cwd, ".env"), "utf8");
    expect(skeleton).toContain("DB_PASSWORD=\n");
    expect(skeleton).not.toContain("hunter2");
    expect((await svc(["env", "pull"], { env, cwd })).code).toBe(1);
    expect((await svc(["env", "pull", "--force", "--out", "other.env"], { env, cwd })).code).toBe(0);
    expect(existsSync(join(cwd, "other.env"))).toBe(true);

    writeFileSync(
      join(cwd, "push.env"),
      '# comment\nexport EXPORTED=yes\nQUOTED="a # not a comment"\nSINGLE=\'x\\ny\'\nMULTI="line1\nline2"\nESCAPED="a\\nb"\nDUP=1\nDUP=2\n',
    );
    const push = await svc(["env", "push", "--from", "push.env"], { env, cwd });
    expect(push.code, push.stderr).toBe(0);
    const values = (await api.services.secrets.values(projectId)).values;
    expect(values).toMatchObject({
      EXPORTED: "yes",
      QUOTED: "a # not a comment",
      SINGLE: "x\\ny",
      MULTI: "line1\nline2",
      ESCAPED: "a\nb",
      DUP: "2",
    });
  });

  it("parses dotenv like the dotenv package", () => {
    expect(parseDotenv("A=1 # trailing\nB = spaced \n  C=`tick`\nD=\n")).toEqual({
      A: "1",
      B: "spaced",
      C: "tick",
      D: "",
    });
  });
});
