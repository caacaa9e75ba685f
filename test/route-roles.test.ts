import { randomUUID } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { atLeast } from "../api/auth/roles.ts";
import { type Access, isRole, ROUTE_ROLES, type RouteKey } from "../api/auth/route-roles.ts";
import { csrfToken } from "../api/dashboard/browser-sessions.ts";
import { SESSION_COOKIE } from "../api/dashboard/session-auth.ts";
import type { AccountRole } from "../protocol/account.ts";
import { call, seedMember, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { noSandboxes, settings } from "./support/no-sandboxes.ts";
import { seedLiveSandbox } from "./support/sandbox-rows.ts";

const ROLES: AccountRole[] = ["viewer", "member", "admin", "owner"];

type Answer = { status: number; text: string };

/** A request as it leaves a client, Host and upgrade headers included (fetch sets neither). */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  return new Promise<Answer>((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    // An upgrade refused is an ordinary answer; one accepted is no refusal either, so it ends here.
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 101, text: "" });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** A refusal for the caller's role, however the surface words it: JSON's code, or the message on a page or in git. */
const refusedForRole = (answer: Answer) =>
  answer.status === 403 &&
  (answer.text.includes('"code":"FORBIDDEN_ROLE"') || /takes the \w+ role or above/.test(answer.text));

/**
 * Issue 32, roles: ROUTE_ROLES walked line by line over real HTTP, every line called by a person of each role of the
 * project's account; the answer is 403 FORBIDDEN_ROLE exactly for the roles below the line's (bodies are minimal
 * or invalid: past the role check, anything but that refusal will do). A line nobody can call here fails the test.
 */
describe.each(databaseKinds("pglite"))("every line of ROUTE_ROLES, for each role (%s)", (kind) => {
  let db: TestDatabase;
  let api: TestApi;
  let projectId: string;
  /** A session with a live sandbox row: a preview host needs one to find the project. */
  let liveSession: string;
  const people = {} as Record<AccountRole, { userId: string; token: string }>;

  beforeAll(async () => {
    db = await freshDatabase(kind);
    api = await startApi(db.sql, {
      orchestrator: { driver: noSandboxes, settings, root: process.cwd(), baseImage: "none" },
    });
    const owner = await seedUser(api.services, "owner");
    people.owner = owner;
    for (const role of ["admin", "member", "viewer"] as const)
      people[role] = await seedMember(api.services, owner.accountId, role);
    projectId = (await call(api.url, "POST", "/v1/projects", { token: owner.token, body: { name: "Walked" } })).body.id;
    liveSession = (await seedLiveSandbox(api.services.sql, owner, projectId)).sessionId;
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  /** Path parameters: ids that exist where the route needs them to, made-up ones where it looks them up later. */
  const params = (): Record<string, string> => ({
    projectId,
    sessionId: randomUUID(),
    crId: "1",
    slug: "nightly",
    name: "web",
    channelRef: "C0000000",
    tokenId: randomUUID(),
    email: "nobody@example.test",
    token: "no-such-invite",
    account: "no-such-account",
    repo: `${projectId}.git`,
    "*": "info/refs",
  });
  const fill = (pattern: string) =>
    pattern.replace(/:(\w+)|\*/g, (param, name: string | undefined) => {
      const value = params()[name ?? param];
      if (value === undefined) throw new Error(`route-roles.test.ts has no value for ${param} (${pattern})`);
      return value;
    });

  /** One line of the table called as `role`'s person. */
  async function callLine(key: RouteKey, role: AccountRole): Promise<Answer> {
    const { token, userId } = people[role];
    const [verb, pattern] = key.split(" ") as [string, string];
    const basic = `Basic ${Buffer.from(`x-svc:${token}`).toString("base64")}`;
    if (verb === "FETCH" || verb === "PUSH") {
      const service = verb === "FETCH" ? "git-upload-pack" : "git-receive-pack";
      return raw(api.url, "GET", `/git/${projectId}.git/info/refs?service=${service}`, { authorization: basic });
    }
    if (verb === "EXEC")
      return raw(api.url, "GET", `${fill(pattern)}?cmd=true`, {
        authorization: `Bearer ${token}`,
        connection: "Upgrade",
        upgrade: "svc-exec",
      });
    const port = new URL(api.url).port;
    if (verb === "PREVIEW")
      return raw(api.url, "GET", "/", {
        host: `3000-${liveSession}.localhost:${port}`,
        authorization: `Bearer ${token}`,
      });
    if (verb === "APP")
      return raw(api.url, "GET", "/", {
        host: `web--${projectId}.localhost:${port}`,
        authorization: `Bearer ${token}`,
      });
    const path = fill(pattern);
    if (path.startsWith("/git/")) return raw(api.url, verb, path, { authorization: basic }, "");
    if (path.startsWith("/dashboard")) {
      // A browser session of its own per call: one line signs its browser out.
      const { secret } = await api.services.browserSessions.open(userId);
      const headers = { cookie: `${SESSION_COOKIE}=${secret}`, "content-type": "application/x-www-form-urlencoded" };
      return raw(api.url, verb, path, headers, verb === "GET" ? undefined : `_csrf=${csrfToken(secret)}`);
    }
    const answer = await call(api.url, verb, path, { token, body: verb === "GET" ? undefined : {} });
    return { status: answer.status, text: JSON.stringify(answer.body) };
  }

  it("answers 403 FORBIDDEN_ROLE to exactly the roles below each line's, and every line is a route", async () => {
    const wrong: string[] = [];
    for (const [key, access] of Object.entries(ROUTE_ROLES) as [RouteKey, Access][]) {
      for (const role of ROLES) {
        const answer = await callLine(key, role);
        const refuse = isRole(access) && !atLeast(role, access);
        // The installation's administrator is none of these people: refused, though not for a role.
        const adminOnly = access === "installation-admin";
        const ok = adminOnly
          ? answer.status === 403 && answer.text.includes('"code":"FORBIDDEN"')
          : refusedForRole(answer) === refuse;
        // A line of no route would pass for every role but the refused ones: the table names only real routes.
        const routed = !/"no route |There is no such page/.test(answer.text);
        if (!ok || !routed) wrong.push(`${key} as ${role} (${access}): ${answer.status} ${answer.text.slice(0, 160)}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
