import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";

describe("request validation and the error shape", () => {
  let db: TestDatabase;
  let api: TestApi;
  let token: string;

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql, { bodyLimit: 4096 });
    token = (await seedUser(api.services)).token;
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  const createProject = (body: unknown) => call(api.url, "POST", "/v1/projects", { token, body });
  const projectCount = async () => (await db.sql.query<{ n: number }>("select count(*)::int as n from projects"))[0]!.n;

  it("names the bad field with 400 and creates nothing", async () => {
    const before = await projectCount();
    const cases: [unknown, string | undefined][] = [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: "   " }, "name"],
      [{ name: 42 }, "name"],
      [{ name: "ok", slug: "Not A Slug" }, "slug"],
      [{ name: "ok", default_branch: "bad..branch" }, "default_branch"],
      [{ name: "ok", account_id: "nope" }, "account_id"],
      [{ name: "ok", surprise: true }, "surprise"],
    ];
    for (const [body, field] of cases) {
      const res = await createProject(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field });
      expect(typeof res.body.error).toBe("string");
    }
    expect(await projectCount()).toBe(before);
  });

  it("answers malformed JSON with 400, wrong media type with 415, oversize with 413", async () => {
    const bad = await call(api.url, "POST", "/v1/projects", {
      token,
      rawBody: "{not json",
      headers: { "content-type": "application/json" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("BAD_REQUEST");

    const text = await call(api.url, "POST", "/v1/projects", {
      token,
      rawBody: "name=x",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(text.status).toBe(415);

    const big = await createProject({ name: "x".repeat(10_000) });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
  });

  it("creates a project with a derived slug and refuses a duplicate with 409", async () => {
    const first = await createProject({ name: "Hello World!" });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ slug: "hello-world", repo_kind: "managed", default_branch: "main" });
    const dup = await createProject({ name: "Hello world" });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe("SLUG_TAKEN");
    const external = await createProject({
      name: "Ext",
      repo_url: "https://git.example.test/ext.git",
      default_branch: "trunk",
    });
    expect(external.body).toMatchObject({
      repo_kind: "external",
      repo_url: "https://git.example.test/ext.git",
      default_branch: "trunk",
    });
  });

  it("answers malformed preview URLs and links with 400 and 401, never 500", async () => {
    const base = `${api.url}/v1/projects`;
    const id = "6f1c2d3e-0000-4000-8000-000000000001";
    expect((await fetch(`${base}/%E0%A4%A/sessions/x/preview/3000/`)).status).toBe(400);
    expect((await fetch(`${base}/${id}/sessions/x/preview/99999/`)).status).toBe(400);
    expect((await fetch(`${base}/${id}/sessions/x/preview/3000/`)).status).toBe(401);
    const forged = await fetch(`${base}/${id}/sessions/x/preview/3000/?svc_preview=not.a-grant`);
    expect(forged.status).toBe(401);
    expect((await forged.json()).code).toBe("UNAUTHENTICATED");
    const host = await fetch(`${api.url}/`, { headers: { cookie: "svc_preview=garbage" } });
    expect(host.status).toBe(404);
  });

  it("answers unknown routes with a JSON 404", async () => {
    const res = await call(api.url, "GET", "/v1/does-not-exist", { token });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe("NOT_FOUND");
  });
});
