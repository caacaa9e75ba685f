import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { type AuthDeps, registerAuthentication } from "./authenticate.ts";
import { atLeast, requireRole } from "./roles.ts";
import { leastRole, ROUTE_ROLES, requireRouteRoles } from "./route-roles.ts";

describe("the route table's guard", () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  /** A bare Fastify behind the guard, with `routes` registered as a plugin, as the API registers its own. */
  async function start(routes: (app: FastifyInstance) => void) {
    app = Fastify();
    requireRouteRoles(app);
    await app.register(async (scope) => routes(scope));
    await app.ready();
    return app;
  }

  it("refuses to start with a route that has no line", async () => {
    await expect(start((a) => a.get("/v1/forgotten", async () => "no"))).rejects.toThrow(
      "route GET /v1/forgotten has no line in ROUTE_ROLES (api/auth/route-roles.ts)",
    );
  });

  it("is part of the API's authentication: registering it there is what stops the API", async () => {
    app = Fastify();
    // The dependencies serve requests only; registration needs none.
    registerAuthentication(app, {} as AuthDeps);
    const routes = app.register(async (scope) => {
      scope.post("/v1/projects/:projectId/forgotten", async () => "no");
    });
    await expect(routes).rejects.toThrow("route POST /v1/projects/:projectId/forgotten has no line");
  });

  it("refuses a route registered for several methods when one of them has no line", async () => {
    await expect(
      start((a) => a.route({ method: ["GET", "PUT"], url: "/v1/projects/:projectId", handler: async () => "" })),
    ).rejects.toThrow("route PUT /v1/projects/:projectId has no line");
  });

  it("gives a listed route, and the HEAD Fastify adds for its GET, the line's access", async () => {
    const seen: Record<string, unknown> = {};
    const started = await start((a) => {
      a.get("/v1/projects/:projectId/secrets", async (req) => req.routeOptions.config.access);
      a.put("/v1/projects/:projectId/secrets", async (req) => req.routeOptions.config.access);
      a.get("/v1/health", async (req) => req.routeOptions.config.access);
    });
    for (const [method, url] of [
      ["GET", "/v1/projects/p/secrets"],
      ["PUT", "/v1/projects/p/secrets"],
      ["GET", "/v1/health"],
    ] as const)
      seen[`${method} ${url}`] = (await started.inject({ method, url })).body;
    expect(seen).toEqual({
      "GET /v1/projects/p/secrets": "viewer",
      "PUT /v1/projects/p/secrets": "admin",
      "GET /v1/health": "anyone",
    });
    expect((await started.inject({ method: "HEAD", url: "/v1/health" })).statusCode).toBe(200);
  });

  it("says the role of the acts that are no route, and refuses to make one of a line that is none", () => {
    expect(leastRole("PUSH /git/:repo.git")).toBe("member");
    expect(leastRole("FETCH /git/:repo.git")).toBe("viewer");
    expect(ROUTE_ROLES["GET /v1/health"]).toBe("anyone");
    expect(() => leastRole("GET /v1/health")).toThrow("takes no account role");
  });
});

describe("roles", () => {
  it("orders owner > admin > member > viewer, each holding what the ones below hold", () => {
    expect(atLeast("owner", "admin")).toBe(true);
    expect(atLeast("admin", "admin")).toBe(true);
    expect(atLeast("member", "admin")).toBe(false);
    expect(atLeast("viewer", "member")).toBe(false);
    expect(atLeast("member", "viewer")).toBe(true);
  });

  it("refuses with FORBIDDEN_ROLE naming the role needed and the caller's", () => {
    expect(() => requireRole("admin", "admin")).not.toThrow();
    expect(() => requireRole("viewer", "member")).toThrow(
      expect.objectContaining({
        code: "FORBIDDEN_ROLE",
        status: 403,
        message: "this takes the member role or above in this account; yours is viewer",
        details: { role: "viewer", required_role: "member" },
      }),
    );
  });
});
