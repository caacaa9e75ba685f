import { CloneCredential } from "../protocol/git.ts";
import { httpRequest } from "./http-json.ts";

/** A minutes-long git credential for the project, issued to the sandbox service key. */
export async function fetchCloneCredential(
  apiUrl: string,
  projectId: string,
  serviceKey: string,
): Promise<CloneCredential> {
  const res = await httpRequest("GET", `${apiUrl.replace(/\/+$/, "")}/projects/${projectId}/git/clone-credential`, {
    headers: { authorization: `Bearer ${serviceKey}` },
    timeoutMs: 15_000,
  });
  if (res.status !== 200) throw new Error(`the API answered ${res.status} for a clone credential`);
  return CloneCredential.parse(JSON.parse(res.body));
}

/** git's credential request: `key=value` lines (protocol, host, path, username...) up to an empty line. */
export function parseCredentialRequest(text: string): Record<string, string> {
  const request: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const clean = line.replace(/\r$/, "");
    if (clean === "") break;
    const eq = clean.indexOf("=");
    if (eq > 0) request[clean.slice(0, eq)] = clean.slice(eq + 1);
  }
  return request;
}

/** A repository path as git and URLs spell it: no surrounding slashes, the `.git` suffix optional. */
function repositoryPath(path: string): string {
  return path.replace(/^\/+|\/+$/g, "").replace(/\.git$/, "");
}

/**
 * Whether git asks for the project's own repository: the same protocol, host (port included) and path as
 * SVC_REPO_URL. Another host (a submodule, a dependency's URL), another repository on the same host (another
 * project of the API), another scheme, and a request without a path (git sends one only with
 * credential.useHttpPath, which the workspace sets) get nothing: the project's credential never leaves for them.
 */
export function isProjectRepository(request: Record<string, string>, repoUrl: string): boolean {
  let repo: URL;
  try {
    repo = new URL(repoUrl);
  } catch {
    return false;
  }
  const protocol = repo.protocol.slice(0, -1);
  if (protocol !== "https" && protocol !== "http") return false;
  if (request.protocol !== protocol || !request.host || request.path === undefined) return false;
  // Through URL: the host lower-cased and a default port dropped, as in the repository URL.
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(request.host)) return false;
  let host: string;
  try {
    host = new URL(`${protocol}://${request.host}/`).host;
  } catch {
    return false;
  }
  if (host !== repo.host) return false;
  let repoPath: string;
  try {
    repoPath = decodeURIComponent(repo.pathname);
  } catch {
    return false;
  }
  return repositoryPath(request.path) === repositoryPath(repoPath) && repositoryPath(repoPath) !== "";
}

/**
 * `svc-git-credential get` (git-credential-main.ts): git's credential-helper protocol. Answers with a minutes-long
 * credential the API issues for the sandbox service key, so no git token ever sits in the environment or in
 * .git/config; and only when git asks for the project's own repository (SVC_REPO_URL).
 */
export async function gitCredentialHelper(action: string | undefined, env: NodeJS.ProcessEnv): Promise<number> {
  if (action !== "get") return 0;
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const { SVC_API_URL: api, SVC_PROJECT_ID: project, SVC_TOKEN: key, SVC_REPO_URL: repoUrl } = env;
  if (!api || !project || !key || !repoUrl) {
    process.stderr.write("svc-git-credential: SVC_API_URL, SVC_PROJECT_ID, SVC_TOKEN and SVC_REPO_URL are required\n");
    return 1;
  }
  const request = parseCredentialRequest(input);
  if (!isProjectRepository(request, repoUrl)) {
    // No answer: git goes on without credentials (or asks its other helpers).
    const asked = `${request.protocol ?? "?"}://${request.host ?? "?"}/${request.path ?? ""}`;
    process.stderr.write(`svc-git-credential: no credential for ${asked}: only for the project's repository\n`);
    return 0;
  }
  let credential: CloneCredential;
  try {
    credential = await fetchCloneCredential(api, project, key);
  } catch (err) {
    process.stderr.write(`svc-git-credential: ${(err as Error).message}\n`);
    return 1;
  }
  process.stdout.write(`username=${credential.username}\npassword=${credential.password}\n`);
  return 0;
}
