import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Sql } from "../db/sql.ts";

/**
 * Server-side policy for pushes into managed repositories, run by receive-pack as `pre-receive`.
 * SVC_PUSH_ROLE is `user` for a person's token and `sandbox` for project tokens and clone credentials;
 * SVC_PUSH_BRANCH is the session branch of the sandbox pushing, when the credential belongs to one.
 * - The default branch changes only by CR merges: sandboxes cannot push it at all; people (`svc ship`) only
 *   fast-forward it and never delete it.
 * - Sandboxes push branches only (refs/heads/*): no tags, nothing under refs/svc/ or any other namespace.
 * - Sandboxes create branches and fast-forward them; they never rewrite one, and delete none but their own
 *   session branch, so no pushed commit of another branch is ever lost.
 */
const PRE_RECEIVE = `#!/bin/sh
zero=0000000000000000000000000000000000000000
status=0
refuse() {
  echo "svc: $1" >&2
  status=1
}
while read -r old new ref; do
  if [ "$SVC_PUSH_ROLE" = user ]; then
    if [ "$ref" = "refs/heads/$SVC_PROTECTED_BRANCH" ]; then
      if [ "$new" = "$zero" ]; then
        refuse "the default branch cannot be deleted"
      elif [ "$old" != "$zero" ] && ! git merge-base --is-ancestor "$old" "$new"; then
        refuse "non-fast-forward push to $ref refused"
      fi
    fi
    continue
  fi
  case "$ref" in
    "refs/heads/$SVC_PROTECTED_BRANCH")
      refuse "$ref changes only by merging a change request (svc cr open, then svc cr merge)"
      ;;
    refs/heads/*)
      if [ "$new" = "$zero" ]; then
        if [ -z "$SVC_PUSH_BRANCH" ] || [ "$ref" != "refs/heads/$SVC_PUSH_BRANCH" ]; then
          refuse "sandboxes cannot delete branches other than their session's own ($ref)"
        fi
      elif [ "$old" != "$zero" ] && ! git merge-base --is-ancestor "$old" "$new"; then
        refuse "force-push to $ref refused: commits are never rewritten"
      fi
      ;;
    refs/tags/*)
      refuse "sandboxes cannot push tags ($ref): tag releases from the default branch after a merge"
      ;;
    *)
      refuse "sandboxes push branches only (refs/heads/*); $ref refused"
      ;;
  esac
done
exit $status
`;

/** Writes the hooks directory that every managed repository uses (via core.hooksPath); returns its path. */
export function installHooks(dataDir: string): string {
  const dir = join(dataDir, "git-hooks");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, "pre-receive");
  writeFileSync(file, PRE_RECEIVE);
  chmodSync(file, 0o755);
  return dir;
}

/** A sandbox's push credential: a clone credential (by its hash) or a project token (by its id). */
export type PushCredential = { cloneCredentialHash: string } | { tokenId: string };

/**
 * The session branch of the sandbox a credential was issued to (SVC_PUSH_BRANCH: the one branch that sandbox may
 * delete), or "" when it belongs to no session (a user's clone credential, a project token made with `cli-token`).
 */
export async function sessionBranchOf(sql: Sql, credential: PushCredential): Promise<string> {
  const [row] =
    "tokenId" in credential
      ? await sql.query<{ branch: string }>(
          `select s.branch from session_sandboxes b join project_sessions s on s.session_id = b.session_id
            where b.token_id = $1`,
          [credential.tokenId],
        )
      : await sql.query<{ branch: string }>(
          `select s.branch from clone_credentials c
             join session_sandboxes b on b.sandbox_id = c.sandbox_id
             join project_sessions s on s.session_id = b.session_id
            where c.credential_hash = $1`,
          [credential.cloneCredentialHash],
        );
  return row?.branch ?? "";
}
