import { request as httpRequest } from "node:http";
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

    // An empty body labelled JSON is no body: a route that needs one says so.
    const empty = await call(api.url, "POST", "/v1/projects", {
      token,
      rawBody: "",
      headers: { "content-type": "application/json" },
    });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ code: "VALIDATION_FAILED", error: "request body is required" });

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

  it("answers malformed preview hosts and links with 404 and 401, never 500", async () => {
    const id = "6f1c2d3e-0000-4000-8000-000000000001";
    const port = new URL(api.url).port;
    /** A request to a preview host, sent to the API's address (`*.localhost` is loopback to browsers and curl). */
    const preview = (host: string, path = "/", headers: Record<string, string> = {}) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest({ host: "127.0.0.1", port, path, headers: { host, ...headers } }, (res) => {
          let body = "";
          res.on("data", (c) => (body += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject).end();
      });
    expect((await preview(`99999-${id}.localhost:${port}`)).status).toBe(404);
    expect((await preview(`3000-${id}.localhost:${port}`)).status).toBe(401);
    const forged = await preview(`3000-${id}.localhost:${port}`, "/?svc_preview=not.a-grant");
    expect(forged.status).toBe(401);
    expect(JSON.parse(forged.body).code).toBe("UNAUTHENTICATED");
    expect((await preview(`3000-${id}.localhost:${port}`, "/", { cookie: "svc_preview=garbage" })).status).toBe(401);
    // The API's own paths serve no preview: there is no such route.
    expect((await fetch(`${api.url}/v1/projects/${id}/sessions/x/preview/3000/`)).status).toBe(404);
    const host = await fetch(`${api.url}/`, { headers: { cookie: "svc_preview=garbage" } });
    expect(host.status).toBe(404);
  });

  it("answers unknown routes with a JSON 404", async () => {
    const res = await call(api.url, "GET", "/v1/does-not-exist", { token });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe("NOT_FOUND");
  });
});
