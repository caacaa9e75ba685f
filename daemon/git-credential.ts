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

/**
 * `svc-agent git-credential get`: git's credential-helper protocol. Answers with a minutes-long credential the
 * API issues for the sandbox service key, so no git token ever sits in the environment or in .git/config.
 */
export async function gitCredentialHelper(action: string | undefined, env: NodeJS.ProcessEnv): Promise<number> {
  if (action !== "get") return 0;
  for await (const _ of process.stdin) {
    // git sends the request attributes; the answer does not depend on them (one repository per sandbox).
  }
  const { SVC_API_URL: api, SVC_PROJECT_ID: project, SVC_TOKEN: key } = env;
  if (!api || !project || !key) {
    process.stderr.write("svc-agent git-credential: SVC_API_URL, SVC_PROJECT_ID and SVC_TOKEN are required\n");
    return 1;
  }
  let credential: CloneCredential;
  try {
    credential = await fetchCloneCredential(api, project, key);
  } catch (err) {
    process.stderr.write(`svc-agent git-credential: ${(err as Error).message}\n`);
    return 1;
  }
  process.stdout.write(`username=${credential.username}\npassword=${credential.password}\n`);
  return 0;
}
