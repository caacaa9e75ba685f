import { CloneCredential } from "../protocol/git.ts";

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
  const res = await fetch(`${api.replace(/\/+$/, "")}/projects/${project}/git/clone-credential`, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(15_000),
  });
  if (!res.ok) {
    process.stderr.write(`svc-agent git-credential: the API answered ${res.status}\n`);
    return 1;
  }
  const credential = CloneCredential.parse(await res.json());
  process.stdout.write(`username=${credential.username}\npassword=${credential.password}\n`);
  return 0;
}
