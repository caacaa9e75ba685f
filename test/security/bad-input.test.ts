import { Agent, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../../api/git/run.ts";
import { call, seedUser, startApi, type TestApi } from "../support/api-server.ts";
import { freshDatabase, type TestDatabase } from "../support/databases.ts";
import { authedUrl, workRepo } from "../support/git-fixture.ts";
import {
  BODY_ROUTES,
  badValues,
  type Case,
  cr,
  crBase,
  MALFORMED_JSON,
  MEDIA_TYPES,
  NON_OBJECT_BODIES,
  OTHER_ROUTES,
  oversized,
  PARAM_BAD,
  PARAM_UNDECODABLE,
} from "./bad-input-cases.ts";

/**
 * Issue 10, item 4, from outside: every route of the API, over real HTTP, fed what an attacker would send. Each
 * answer must be a 4xx in the catalogue's shape ({error, code}), never a 500 nor a framework body, and after the
 * whole sweep nothing may have changed: same rows, same refs, no CR number consumed. The server runs without a
 * sandbox driver, so session routes prove that validation answers before NOT_CONFIGURED.
 */

describe("bad input is a 4xx that changes nothing (issue 10, item 4)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let token: string;
  let projectId: string;
  const tally = new Map<string, { tried: number; held: number }>();
  const failures: string[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });

  /** Exactly the bytes and headers given: fetch would add a content-type of its own to a string body. */
  function send(c: Case): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (c.contentType) headers["content-type"] = c.contentType;
    if (c.body !== undefined) headers["content-length"] = String(Buffer.byteLength(c.body));
    const url = new URL(api.url);
    return new Promise((resolve, reject) => {
      const req = request(
        { host: url.hostname, port: url.port, method: c.method, path: c.path, headers, agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(c.body);
    });
  }

  async function attempt(c: Case): Promise<void> {
    const count = tally.get(c.category) ?? { tried: 0, held: 0 };
    tally.set(c.category, count);
    count.tried += 1;
    const res = await send(c).catch((err: Error) => ({ status: 0, text: `no HTTP answer: ${err.message}` }));
    let body: { error?: unknown; code?: unknown; field?: unknown } | undefined;
    try {
      body = JSON.parse(res.text);
    } catch {}
    const problems: string[] = [];
    if (res.status !== c.expect.status) problems.push(`status ${res.status}, wanted ${c.expect.status}`);
    if (typeof body?.error !== "string" || typeof body?.code !== "string") problems.push("not {error, code}");
    if (c.expect.code && body?.code !== c.expect.code) problems.push(`code ${body?.code}, wanted ${c.expect.code}`);
    const field = c.expect.field;
    if (typeof field === "string" && body?.field !== field) problems.push(`field ${body?.field}, wanted ${field}`);
    if (field instanceof RegExp && !field.test(String(body?.field))) problems.push(`field ${body?.field} !~ ${field}`);
    if (c.secret && res.text.includes(c.secret)) problems.push("the answer echoes the secret value");
    if (problems.length === 0) count.held += 1;
    else failures.push(`[${c.category}] ${c.label}: ${problems.join("; ")} — ${res.text.slice(0, 160)}`);
  }

  /** Everything an attack could have changed: rows (but token use times), refs, repositories on disk. */
  async function snapshot() {
    const rows: Record<string, unknown> = {};
    for (const [table, order] of [
      ["accounts", "id"],
      ["users", "id"],
      ["memberships", "user_id, account_id"],
      ["projects", "id"],
      ["change_requests", "cr_id"],
      ["project_secrets", "project_id, name"],
      ["project_sessions", "session_id"],
      ["session_sandboxes", "sandbox_id"],
      ["clone_credentials", "1"],
    ] as const) {
      rows[table] = await db.sql.query(`select * from ${table} order by ${order}`);
    }
    rows.tokens = await db.sql.query("select id, user_id, project_id, name, revoked_at from tokens order by id");
    const refs = await git(["for-each-ref", "--format=%(refname) %(objectname)"], {
      dir: api.services.repos.managedDir(projectId),
    });
    const { readdirSync } = await import("node:fs");
    return JSON.stringify({ rows, refs: refs.stdout, repos: readdirSync(`${api.dataDir}/repos`).sort() });
  }

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    token = (await seedUser(api.services)).token;
    const project = await call(api.url, "POST", "/v1/projects", { token, body: { name: "Sweep" } });
    projectId = project.body.id;
    const work = await workRepo(authedUrl(project.body.repo_url, token));
    await work.commit("initial", { "README.md": "hello\n" });
    await work.pushed("main");
    await work.checkout("feature", { create: true });
    await work.commit("feature work", { "feature.txt": "x\n" });
    await work.pushed("feature");
    const cr = await call(api.url, "POST", `/v1/projects/${projectId}/change-requests`, {
      token,
      body: { title: "the one CR", head_ref: "feature" },
    });
    expect(cr.body.number).toBe(1);
    expect(
      (await call(api.url, "PUT", `/v1/projects/${projectId}/secrets`, { token, body: { secrets: { KEEP: "v" } } }))
        .status,
    ).toBe(200);
  });
  afterAll(async () => {
    agent.destroy();
    await api?.close();
    await db?.drop();
  });

  const fill = (path: string, params: Record<string, string> = {}) =>
    path.replace(/:(\w+)/g, (_, name: string) => params[name] ?? DEFAULTS[name]!);
  const DEFAULTS: Record<string, string> = {
    get projectId() {
      return projectId;
    },
    crId: "1",
    sessionId: "00000000-0000-4000-8000-000000000000",
    tokenId: "00000000-0000-4000-8000-000000000000",
    port: "3000",
    get repo() {
      return `${projectId}.git`;
    },
  };

  it("the baseline bodies are valid: each case below differs from an accepted request by one thing", () => {
    for (const route of BODY_ROUTES) expect(route.schema.safeParse(route.base).success, route.name).toBe(true);
  });

  it("refuses every bad body, path parameter and media type with a 4xx in the catalogue's shape, changing nothing", async () => {
    const before = await snapshot();
    const cases: Case[] = [];
    const json = (v: unknown) => JSON.stringify(v);

    for (const route of BODY_ROUTES) {
      const path = fill(route.path);
      for (const f of route.fields) {
        for (const bad of badValues(f.kind)) {
          const secret = f.kind === "secret-value" && typeof bad.value === "string" ? "MARK" : undefined;
          cases.push({
            category: bad.category,
            label: `${route.name} ${f.name}: ${bad.label}`,
            method: route.method,
            path,
            body: json(f.set(secret ? `MARK${bad.value}MARK` : bad.value)),
            contentType: "application/json",
            expect: { status: 400, code: "VALIDATION_FAILED", field: f.field },
            secret,
          });
        }
        const big = oversized(f);
        if (big !== undefined) {
          cases.push({
            category: "oversized strings and numbers",
            label: `${route.name} ${f.name}: ${String(big).length} characters`,
            method: route.method,
            path,
            body: json(f.set(big)),
            contentType: "application/json",
            expect: { status: 400, code: "VALIDATION_FAILED", field: f.field },
          });
        }
      }
      if (route.fields.length > 0) {
        cases.push({
          category: "wrong types",
          label: `${route.name}: unknown field`,
          method: route.method,
          path,
          body: json({ ...route.base, surprise: "x" }),
          contentType: "application/json",
          expect: { status: 400, code: "VALIDATION_FAILED", field: "surprise" },
        });
      }
    }
    // Metadata nested too deep, and a metadata key too long.
    let deep: unknown = "leaf";
    for (let i = 0; i < 40; i++) deep = { d: deep };
    cases.push({
      category: "oversized strings and numbers",
      label: "open CR metadata: 40 levels deep",
      method: "POST",
      path: fill(cr),
      body: json({ ...crBase, metadata: deep }),
      contentType: "application/json",
      expect: { status: 400, code: "VALIDATION_FAILED", field: /^metadata/ },
    });

    const bodyTargets = [
      ...BODY_ROUTES.map((r) => ({ name: r.name, method: r.method, path: fill(r.path), valid: json(r.base) })),
      ...OTHER_ROUTES.filter((r) => r.body).map((r) => ({
        name: `${r.method} ${r.path}`,
        method: r.method,
        path: fill(r.path),
        valid: "{}",
      })),
    ];
    for (const target of bodyTargets) {
      if (!target.path.startsWith("/git/")) {
        for (const body of NON_OBJECT_BODIES) {
          cases.push({
            category: "JSON bodies that are not objects",
            label: `${target.name}: ${body}`,
            method: target.method,
            path: target.path,
            body,
            contentType: "application/json",
            expect: { status: 400, code: "VALIDATION_FAILED" },
          });
        }
        for (const body of MALFORMED_JSON) {
          cases.push({
            category: "malformed JSON",
            label: `${target.name}: ${JSON.stringify(body)}`,
            method: target.method,
            path: target.path,
            body,
            contentType: "application/json",
            expect: { status: 400, code: "BAD_REQUEST" },
          });
        }
      }
      for (const type of MEDIA_TYPES) {
        if (target.path.startsWith("/git/") && type?.startsWith("application/x-git-")) continue;
        cases.push({
          category: "non-JSON media types",
          label: `${target.name}: ${type ?? "no content-type"}`,
          method: target.method,
          path: target.path,
          body: target.valid,
          contentType: type,
          expect: { status: 415, code: "UNSUPPORTED_MEDIA_TYPE" },
        });
      }
    }

    const allRoutes = [
      ...BODY_ROUTES.map((r) => ({ method: r.method, path: r.path, body: json(r.base) })),
      ...OTHER_ROUTES.map((r) => ({ method: r.method, path: r.path, body: undefined })),
    ];
    for (const route of allRoutes) {
      for (const param of route.path.match(/:\w+/g)?.map((p) => p.slice(1)) ?? []) {
        const base = { method: route.method, body: route.body, contentType: route.body ? "application/json" : null };
        for (const bad of PARAM_BAD) {
          cases.push({
            ...base,
            category: "control characters in path parameters",
            label: `${route.method} ${route.path} :${param}=${bad}`,
            path: fill(route.path, { [param]: bad }),
            expect: { status: 400, code: "VALIDATION_FAILED", field: param },
          });
        }
        for (const bad of PARAM_UNDECODABLE) {
          cases.push({
            ...base,
            category: "undecodable path parameters",
            label: `${route.method} ${route.path} :${param}=${bad}`,
            path: fill(route.path, { [param]: bad }),
            expect: { status: 400, code: "BAD_REQUEST" },
          });
        }
        for (const [length, status, code] of [
          [101, 400, "VALIDATION_FAILED"],
          [5_000, 400, "VALIDATION_FAILED"],
          [20_000, 431, "HEADERS_TOO_LARGE"],
        ] as const) {
          cases.push({
            ...base,
            // The HTTP parser refuses the request line before any body: send none, it would meet a closed socket.
            ...(status === 431 ? { body: undefined, contentType: null } : {}),
            category: "oversized path parameters",
            label: `${route.method} ${route.path} :${param} of ${length}`,
            path: fill(route.path, { [param]: "a".repeat(length) }),
            expect: { status, code },
          });
        }
      }
    }
    // Under the router's limit but over the route's own: a CR reference is at most 64 characters.
    cases.push({
      category: "oversized path parameters",
      label: "GET CR :crId of 65",
      method: "GET",
      path: fill(`${cr}/:crId`, { crId: "1".repeat(65) }),
      expect: { status: 400, code: "VALIDATION_FAILED", field: "crId" },
    });

    for (const c of cases) await attempt(c);

    const report = [...tally].map(([category, n]) => `${n.held}/${n.tried}  ${category}`).join("\n");
    const total = [...tally.values()].reduce((a, n) => ({ tried: a.tried + n.tried, held: a.held + n.held }), {
      tried: 0,
      held: 0,
    });
    console.log(`bad-input sweep (held/tried per category):\n${report}\n${total.held}/${total.tried}  in all`);
    expect(failures.slice(0, 40)).toEqual([]);
    expect(total.held).toBe(total.tried);

    expect(await snapshot()).toBe(before);
    expect((await call(api.url, "GET", "/v1/health")).status).toBe(200);
  });

  it("still accepts what is legitimate: multi-line text, an absent body, the next CR number", async () => {
    const created = await call(api.url, "POST", `/v1/projects/${projectId}/change-requests`, {
      token,
      body: crBase,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ number: 2, description: crBase.description });
    const secrets = await call(api.url, "PUT", `/v1/projects/${projectId}/secrets`, {
      token,
      body: { secrets: { MULTI: "line 1\n\tline 2\r\n" } },
    });
    expect(secrets.status).toBe(200);
    // No body at all (no content-type, length 0) where a route takes none.
    expect((await call(api.url, "POST", "/v1/accounts/tokens", { token })).status).toBe(201);
    expect((await call(api.url, "POST", `/v1/projects/${projectId}/change-requests/2/close`, { token })).status).toBe(
      200,
    );
    // A valid session request passes validation and meets the missing sandbox driver.
    const session = await call(api.url, "POST", `/v1/projects/${projectId}/sessions`, {
      token,
      body: { base_ref: "feature/x-1.2", prompt: "a\tb\nc" },
    });
    expect(session.status).toBe(503);
    expect(session.body.code).toBe("NOT_CONFIGURED");
  });
});
