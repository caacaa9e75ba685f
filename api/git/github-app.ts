import { createPrivateKey, createSign, type KeyObject } from "node:crypto";
import { z } from "zod";
import { RepoUnavailableError } from "./repositories.ts";

export type GitHubApp = { appId: number; installationId: number; privateKey: string; apiUrl: string };

/** GitHub's answer to POST /app/installations/{id}/access_tokens (201). */
const InstallationToken = z.object({ token: z.string().min(1), expires_at: z.string().datetime() });

/** An installation token is used until this close to its expiry: a clone or fetch may take minutes. */
const REFRESH_MARGIN_MS = 5 * 60_000;
const REQUEST_TIMEOUT_MS = 15_000;

const base64url = (value: string | Buffer) => Buffer.from(value).toString("base64url");

/** The app's own JWT (RS256); GitHub takes at most 10 minutes and checks iat against its clock. */
function appJwt(appId: number, key: KeyObject): string {
  const seconds = Math.floor(Date.now() / 1000);
  // Backdated a minute for clock drift, as GitHub advises.
  const payload = { iat: seconds - 60, exp: seconds + 540, iss: String(appId) };
  const unsigned = `${base64url(JSON.stringify({ alg: "RS256", typ: "JWT" }))}.${base64url(JSON.stringify(payload))}`;
  const signature = createSign("RSA-SHA256").update(unsigned).sign(key);
  return `${unsigned}.${base64url(signature)}`;
}

/**
 * Installation tokens of a GitHub App, minted on demand and reused until near their expiry: what git sends as
 * `x-access-token` to private repositories, in place of a long-lived personal token.
 */
export function createGitHubAppTokens(app: GitHubApp) {
  let key: KeyObject | undefined;
  let cached: { token: string; expiresAt: number } | undefined;
  let pending: Promise<string> | undefined;

  async function mint(): Promise<string> {
    try {
      key ??= createPrivateKey(app.privateKey);
    } catch {
      throw new RepoUnavailableError("the GitHub App's private key (SVC_GITHUB_APP_PRIVATE_KEY) cannot be read");
    }
    const url = `${app.apiUrl.replace(/\/+$/, "")}/app/installations/${app.installationId}/access_tokens`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: {
          accept: "application/vnd.github+json",
          authorization: `Bearer ${appJwt(app.appId, key)}`,
          "user-agent": "svc",
          "x-github-api-version": "2022-11-28",
        },
        // The app's JWT goes to SVC_GITHUB_API_URL and nowhere else: a redirect is answered as a refusal (HTTP 3xx).
        redirect: "manual",
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      throw new RepoUnavailableError(`GitHub at ${app.apiUrl} cannot be reached: ${(err as Error).message}`);
    }
    const body: unknown = await res.json().catch(() => undefined);
    if (res.status !== 201) {
      const message = (body as { message?: unknown } | undefined)?.message;
      throw new RepoUnavailableError(
        `GitHub refused an installation token for app ${app.appId}, installation ${app.installationId} (HTTP ${res.status}${typeof message === "string" ? `: ${message}` : ""})`,
      );
    }
    const parsed = InstallationToken.safeParse(body);
    if (!parsed.success) throw new RepoUnavailableError("GitHub's installation token answer has no token and expiry");
    cached = { token: parsed.data.token, expiresAt: Date.parse(parsed.data.expires_at) };
    return cached.token;
  }

  return {
    /** A token valid for at least a few more minutes; concurrent callers share one request. */
    token(): Promise<string> {
      if (cached && cached.expiresAt - Date.now() > REFRESH_MARGIN_MS) return Promise.resolve(cached.token);
      pending ??= mint().finally(() => {
        pending = undefined;
      });
      return pending;
    },
  };
}

/** The self-host's repository access as git needs it: the fixed token when there is one, else the app's. */
export function repoAccessToken(
  access: { token?: string; app?: GitHubApp } | undefined,
): (() => Promise<string>) | undefined {
  if (access?.token) {
    const token = access.token;
    return async () => token;
  }
  if (!access?.app) return undefined;
  const tokens = createGitHubAppTokens(access.app);
  return () => tokens.token();
}
