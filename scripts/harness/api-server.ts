import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildApp } from "../../api/app.ts";
import type { AppOptions } from "../../api/app-options.ts";
import type { Sql } from "../../api/db/sql.ts";
import { listenForSandboxesAt } from "../../api/http/sandbox-socket.ts";
import type { Services } from "../../api/services.ts";
import type { AccountRole } from "../../protocol/account.ts";

export type TestApi = { url: string; dataDir: string; services: Services; close(): Promise<void> };

/**
 * SVC_REPO_ALLOWED_HOSTS of a test API unless a test says otherwise: suites stand external git hosts up on loopback,
 * and name `git.example.test` (never resolved) where only the URL matters. A stack allows no host by default.
 */
export const TEST_REPO_ALLOWED_HOSTS = ["127.0.0.1", "localhost", "git.example.test"];

/** The real API on an ephemeral loopback port, with its repositories in a fresh temporary directory. */
export async function startApi(
  sql: Sql,
  options: {
    bodyLimit?: number;
    /** SVC_GIT_MAX_PUSH_MB of this API. */
    gitMaxPushMb?: number;
    host?: string;
    port?: number;
    orchestrator?: AppOptions["orchestrator"];
    apps?: AppOptions["apps"];
    /** Another replica of an API: the same repositories on a shared volume. */
    dataDir?: string;
    slack?: AppOptions["slack"];
    /** Default TEST_REPO_ALLOWED_HOSTS. */
    repoAllowedHosts?: string[];
    repoAccess?: AppOptions["repoAccess"];
    /** Single sign-on: the provider's issuer, this API's client there, the domains that join by themselves. */
    oidc?: AppOptions["oidc"];
    /** SVC_PLANS of this API; default one plan capped by the orchestrator settings' sessionCap. */
    plans?: AppOptions["plans"];
    /** The link socket's directory, as an embedded stack's API listens there (the driver's linkSocketDir). */
    linkSocketDir?: string;
  } = {},
): Promise<TestApi> {
  let url = "";
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "svc-api-"));
  const { app, services } = await buildApp({
    sql,
    dataDir,
    publicUrl: () => url,
    // Errors only, unless SVC_TEST_LOG_LEVEL says otherwise (info: the pool's and reconciler's decisions): a green
    // api tier logs none, and a failing run then shows what went wrong inside the API (a git request's 500).
    logLevel: process.env.SVC_TEST_LOG_LEVEL ?? "error",
    bodyLimit: options.bodyLimit,
    gitMaxPushMb: options.gitMaxPushMb,
    secretsKey: randomBytes(32).toString("base64"),
    orchestrator: options.orchestrator,
    slack: options.slack,
    apps: options.apps,
    repoAllowedHosts: options.repoAllowedHosts ?? TEST_REPO_ALLOWED_HOSTS,
    repoAccess: options.repoAccess,
    oidc: options.oidc,
    plans: options.plans,
  });
  await app.listen({ port: options.port ?? 0, host: options.host ?? "127.0.0.1" });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const stopSocket = options.linkSocketDir ? await listenForSandboxesAt(app.server, options.linkSocketDir) : () => {};
  return {
    url,
    dataDir,
    services,
    close: () => {
      stopSocket();
      return app.close();
    },
  };
}

let counter = 0;

/** A user with an account of their own and a user token. */
export async function seedUser(services: Services, label = "user") {
  counter += 1;
  const slug = `${label}-${counter}-${process.pid}`;
  const { userId, accountId } = await services.accounts.createUserWithAccount({
    email: `${slug}@example.test`,
    name: label,
    accountSlug: slug,
  });
  const { token } = await services.tokens.mint({ userId, name: "test" });
  return { userId, accountId, token };
}

/** A user who belongs to `accountId` with `role` and to no account of their own, with a user token. */
export async function seedMember(services: Services, accountId: string, role: AccountRole, label: string = role) {
  counter += 1;
  const [user] = await services.sql.query<{ id: string }>(
    "insert into users (email, name) values ($1, $2) returning id",
    [`${label}-${counter}-${process.pid}@example.test`, label],
  );
  await services.sql.query("insert into memberships (account_id, user_id, role) values ($1, $2, $3)", [
    accountId,
    user!.id,
    role,
  ]);
  const { token } = await services.tokens.mint({ userId: user!.id, name: "test" });
  return { userId: user!.id, accountId, token };
}

// biome-ignore lint/suspicious/noExplicitAny: an API answer that tests and benchmarks read field by field
export type Reply = { status: number; body: any; headers: Headers };

export async function call(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}
