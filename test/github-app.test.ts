import { createVerify, generateKeyPairSync } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../api/config.ts";
import { createGitHubAppTokens, repoAccessToken } from "../api/git/github-app.ts";
import { createRemoteAddressCheck } from "../api/git/remote-address.ts";
import { createRepositories } from "../api/git/repositories.ts";
import { git } from "../api/git/run.ts";
import { workRepo } from "./support/git-fixture.ts";
import { serveGitRequest } from "./support/git-server.ts";

const APP_ID = 31337;
const INSTALLATION_ID = 4242;
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const PEM = privateKey.export({ type: "pkcs1", format: "pem" }).toString();
const ACCOUNT_ID = "00000000-0000-4000-8000-000000000001";
/** The fake GitHub is on loopback, which a stack must allow; the app's token serves every account here. */
const reach = {
  checkRemote: createRemoteAddressCheck({ allowedHosts: ["127.0.0.1"] }),
  repoAccessServes: async () => true,
};

/**
 * A stand-in for github.com and api.github.com: the REST endpoint that mints installation tokens (checking the
 * app's RS256 JWT as GitHub does, answering as GitHub does) and smart HTTP for one private repository, which takes
 * only a token it minted, as `x-access-token` basic auth.
 */
async function fakeGitHub(root: string) {
  const minted: string[] = [];
  const lifetime = { ms: 3600_000 };
  const requests: { path: string; accept?: string; apiVersion?: string }[] = [];
  const json = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify(body));

  function mintToken(req: IncomingMessage, res: ServerResponse, installation: string) {
    requests.push({
      path: req.url!,
      accept: req.headers.accept,
      apiVersion: req.headers["x-github-api-version"] as string,
    });
    const jwt = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "";
    const [header = "", payload = "", signature = ""] = jwt.split(".");
    const valid = createVerify("RSA-SHA256")
      .update(`${header}.${payload}`)
      .verify(publicKey, Buffer.from(signature, "base64url"));
    if (!valid) {
      return json(res, 401, {
        message: "A JSON web token could not be decoded",
        documentation_url: "https://docs.github.com/rest",
      });
    }
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
    const now = Date.now() / 1000;
    if (JSON.parse(Buffer.from(header, "base64url").toString()).alg !== "RS256" || claims.iss !== String(APP_ID)) {
      return json(res, 401, { message: "Integration not found", documentation_url: "https://docs.github.com/rest" });
    }
    if (claims.exp - claims.iat > 600 || claims.iat > now + 5 || claims.exp < now) {
      return json(res, 401, {
        message: "'Expiration time' claim ('exp') is too far in the future",
        documentation_url: "https://docs.github.com/rest",
      });
    }
    if (installation !== String(INSTALLATION_ID)) {
      return json(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest" });
    }
    const token = `ghs_${minted.length}${"x".repeat(30)}`;
    minted.push(token);
    json(res, 201, {
      token,
      expires_at: new Date(Date.now() + lifetime.ms).toISOString().replace(/\.\d+Z$/, "Z"),
      permissions: { contents: "write", metadata: "read" },
      repository_selection: "selected",
    });
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const installation = /^\/api\/v3\/app\/installations\/([^/]+)\/access_tokens$/.exec(url.pathname)?.[1];
    if (installation !== undefined && req.method === "POST") return mintToken(req, res, installation);
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    const [user, password] = Buffer.from(basic ?? "", "base64")
      .toString()
      .split(":");
    if (user !== "x-access-token" || !minted.includes(password ?? "")) {
      res.writeHead(401, { "www-authenticate": 'Basic realm="GitHub"' }).end();
      return;
    }
    serveGitRequest(req, res, root, "app");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    apiUrl: `${origin}/api/v3`,
    minted,
    lifetime,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("repository access through a GitHub App", () => {
  let github: Awaited<ReturnType<typeof fakeGitHub>>;
  let repoUrl: string;

  beforeAll(async () => {
    const root = mkdtempSync(join(tmpdir(), "svc-github-"));
    github = await fakeGitHub(root);
    await git(["init", "--bare", "-q", "--initial-branch=main", join(root, "org", "private.git")]);
    const dev = await workRepo(join(root, "org", "private.git"));
    await dev.commit("first", { "README.md": "private\n" });
    await dev.git(["push", "-q", "origin", "main"]);
    repoUrl = `${github.origin}/org/private.git`;
  });
  afterAll(() => github?.close());

  it("clones a private repository with an installation token minted from the app's key", async () => {
    const repos = createRepositories({
      dataDir: mkdtempSync(join(tmpdir(), "svc-data-")),
      repoAccessToken: repoAccessToken({
        app: { appId: APP_ID, installationId: INSTALLATION_ID, privateKey: PEM, apiUrl: github.apiUrl },
      }),
      repoAccessUrl: `${github.origin}/`,
      ...reach,
    });
    const dir = await repos.open({ id: "p1", account_id: ACCOUNT_ID, repo_kind: "external", repo_url: repoUrl });
    const { stdout } = await git(["log", "--format=%s", "main"], { dir });
    expect(stdout.trim()).toBe("first");
    expect(github.requests.at(-1)).toEqual({
      path: `/api/v3/app/installations/${INSTALLATION_ID}/access_tokens`,
      accept: "application/vnd.github+json",
      apiVersion: "2022-11-28",
    });
  });

  it("reuses a token until five minutes before it expires, then mints another", async () => {
    const tokens = createGitHubAppTokens({
      appId: APP_ID,
      installationId: INSTALLATION_ID,
      privateKey: PEM,
      apiUrl: github.apiUrl,
    });
    const before = github.minted.length;
    const [a, b] = await Promise.all([tokens.token(), tokens.token()]);
    expect(a).toBe(b);
    expect(await tokens.token()).toBe(a);
    expect(github.minted.length).toBe(before + 1);
    github.lifetime.ms = 4 * 60_000;
    try {
      const soon = createGitHubAppTokens({
        appId: APP_ID,
        installationId: INSTALLATION_ID,
        privateKey: PEM,
        apiUrl: github.apiUrl,
      });
      const c = await soon.token();
      expect(await soon.token()).not.toBe(c);
      expect(github.minted.length).toBe(before + 3);
    } finally {
      github.lifetime.ms = 3600_000;
    }
  });

  it("says why GitHub refused the app: the fetch fails with that reason", async () => {
    const other = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
    const wrongKey = other.export({ type: "pkcs8", format: "pem" }).toString();
    const repos = createRepositories({
      dataDir: mkdtempSync(join(tmpdir(), "svc-data-")),
      repoAccessToken: repoAccessToken({
        app: { appId: APP_ID, installationId: INSTALLATION_ID, privateKey: wrongKey, apiUrl: github.apiUrl },
      }),
      repoAccessUrl: `${github.origin}/`,
      ...reach,
    });
    await expect(
      repos.open({ id: "p2", account_id: ACCOUNT_ID, repo_kind: "external", repo_url: repoUrl }),
    ).rejects.toThrow(
      `GitHub refused an installation token for app ${APP_ID}, installation ${INSTALLATION_ID} (HTTP 401: A JSON web token could not be decoded)`,
    );
    const wrongInstallation = createGitHubAppTokens({
      appId: APP_ID,
      installationId: 1,
      privateKey: PEM,
      apiUrl: github.apiUrl,
    });
    await expect(wrongInstallation.token()).rejects.toThrow("(HTTP 404: Not Found)");
  });

  it("never lets the app's JWT follow a redirect: a 3xx is a refusal", async () => {
    // GitHub's real API behind a redirect: a mint that followed it would get a token there.
    const seen: (string | undefined)[] = [];
    const redirector = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(307, { location: `${github.apiUrl}${req.url}` }).end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve));
    try {
      const before = github.requests.length;
      const tokens = createGitHubAppTokens({
        appId: APP_ID,
        installationId: INSTALLATION_ID,
        privateKey: PEM,
        apiUrl: `http://127.0.0.1:${(redirector.address() as AddressInfo).port}/api/v3`,
      });
      await expect(tokens.token()).rejects.toThrow(`installation ${INSTALLATION_ID} (HTTP 307)`);
      expect(seen).toHaveLength(1);
      expect(github.requests.length).toBe(before);
    } finally {
      redirector.close();
    }
  });

  it("is configured by its three settings together; a fixed token wins over it", async () => {
    expect(() => loadConfig({ SVC_GITHUB_APP_ID: "12" })).toThrow(
      "SVC_GITHUB_APP_ID, SVC_GITHUB_APP_INSTALLATION_ID and SVC_GITHUB_APP_PRIVATE_KEY go together",
    );
    const app = {
      SVC_GITHUB_APP_ID: "12",
      SVC_GITHUB_APP_INSTALLATION_ID: "34",
      SVC_GITHUB_APP_PRIVATE_KEY: PEM,
    };
    expect(loadConfig(app).repoAccess.app).toEqual({
      appId: 12,
      installationId: 34,
      privateKey: PEM,
      apiUrl: "https://api.github.com",
    });
    const both = loadConfig({ ...app, SVC_REPO_ACCESS_TOKEN: "ghp_fixed" }).repoAccess;
    expect(await repoAccessToken(both)?.()).toBe("ghp_fixed");
  });
});
