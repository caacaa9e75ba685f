import { git } from "./run.ts";

/** The fixed identity of merge commits (SPEC "Merge" (b)). */
export const MERGE_IDENTITY = { name: "svc", email: "noreply@svc.local" };

const identityEnv = {
  GIT_AUTHOR_NAME: MERGE_IDENTITY.name,
  GIT_AUTHOR_EMAIL: MERGE_IDENTITY.email,
  GIT_COMMITTER_NAME: MERGE_IDENTITY.name,
  GIT_COMMITTER_EMAIL: MERGE_IDENTITY.email,
};

/** Writes the two-parent merge commit for an already merged tree; touches no ref. */
export async function commitMerge(
  dir: string,
  tree: string,
  baseSha: string,
  headSha: string,
  message: string,
): Promise<string> {
  const { stdout } = await git(["commit-tree", tree, "-p", baseSha, "-p", headSha, "-F", "-"], {
    dir,
    input: message.endsWith("\n") ? message : `${message}\n`,
    env: identityEnv,
  });
  return stdout.trim();
}
