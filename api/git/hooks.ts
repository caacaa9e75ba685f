import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Sql } from "../db/sql.ts";

/**
 * Server-side policy for every push the API's git endpoint receives, run by receive-pack as `pre-receive`:
 * - SVC_PROTECTED_BRANCH (the default branch) moves only by CR merges, which never push: a push may create it
 *   (the first `svc ship`) and nothing else, whoever pushes. `HEAD` and case variants of it are no branch names.
 * - SVC_PUSH_ROLE `sandbox` (a credential of a running sandbox) pushes only its session branch, SVC_PUSH_BRANCH,
 *   and only forward: no other branch, no tag, no deletion, no rewrite, so no commit of anyone else is touched.
 * - `refs/svc/` is svc's: a sandbox writes only its session's checkpoint ref, SVC_PUSH_CHECKPOINT (any way: it is
 *   replaced at every stop and deleted when there is nothing unsaved), never relayed; nobody else writes there.
 * - SVC_PUSH_ROLE `user` (a person's token or credential) pushes any other ref as plain git allows.
 * - SVC_RELAY_URL set (an external repository, whose mirror receives the push): the accepted session branch is
 *   pushed on to the real remote, never forced, before the mirror takes it; a refusal there refuses the push, so
 *   the mirror never holds what the remote does not.
 */
const PRE_RECEIVE = `#!/bin/sh
zero=0000000000000000000000000000000000000000
default_ref="refs/heads/$SVC_PROTECTED_BRANCH"
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }
default_lower=$(lower "$default_ref")
status=0
relay=""
refuse() {
  echo "svc: $1" >&2
  status=1
}
while read -r old new ref; do
  if [ "$ref" = "$default_ref" ]; then
    if [ "$old" != "$zero" ] || [ "$SVC_PUSH_ROLE" != user ]; then
      refuse "$SVC_PROTECTED_BRANCH changes only by merging a change request: push your commits to another branch and open one (svc cr open --head <branch>; svc ship does both)"
    fi
    continue
  fi
  if [ "$ref" = refs/heads/HEAD ] || [ "$(lower "$ref")" = "$default_lower" ]; then
    refuse "$ref is refused: HEAD and case variants of $SVC_PROTECTED_BRANCH are not branch names here"
    continue
  fi
  case "$ref" in refs/svc/*)
    if [ "$SVC_PUSH_ROLE" = sandbox ] && [ -n "$SVC_PUSH_CHECKPOINT" ] && [ "$ref" = "$SVC_PUSH_CHECKPOINT" ]; then
      continue
    fi
    refuse "$ref is refused: refs/svc/ is written by svc alone"
    continue
    ;;
  esac
  [ "$SVC_PUSH_ROLE" = user ] && continue
  if [ -z "$SVC_PUSH_BRANCH" ] || [ "$ref" != "refs/heads/$SVC_PUSH_BRANCH" ]; then
    refuse "a sandbox pushes only its session branch ($SVC_PUSH_BRANCH): git push origin HEAD; $ref refused"
  elif [ "$new" = "$zero" ]; then
    refuse "the session branch $SVC_PUSH_BRANCH cannot be deleted"
  elif [ "$old" != "$zero" ] && ! git merge-base --is-ancestor "$old" "$new"; then
    refuse "force-push to $ref refused: commits are never rewritten; merge instead of rebasing"
  else
    relay="$relay $new:$ref"
  fi
done
[ $status -ne 0 ] && exit $status
if [ -n "$SVC_RELAY_URL" ] && [ -n "$relay" ]; then
  # Pushed by URL, not by the mirror's remote: no tracking ref is written inside receive-pack's quarantine.
  # Its messages reach the pusher: without the user:password@ a repository URL may carry.
  out=$(git push --quiet --no-verify "$SVC_RELAY_URL" $relay 2>&1) && pushed=1 || pushed=0
  [ -n "$out" ] && printf '%s\n' "$out" | sed -E 's#//[^/@[:space:]]+@#//#g' >&2
  if [ $pushed -eq 0 ]; then
    echo "svc: the project's repository refused the push" >&2
    exit 1
  fi
fi
exit 0
`;

/** Writes the hooks directory that every repository the API serves uses (via core.hooksPath); returns its path. */
export function installHooks(dataDir: string): string {
  const dir = join(dataDir, "git-hooks");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, "pre-receive");
  writeFileSync(file, PRE_RECEIVE);
  chmodSync(file, 0o755);
  return dir;
}

/**
 * The session of a sandbox: its branch, the one branch its credentials may push (SVC_PUSH_BRANCH), and its id,
 * which names the one checkpoint ref it may write and fetch.
 */
export async function sandboxSessionOf(
  sql: Sql,
  sandboxId: string,
): Promise<{ sessionId: string; branch: string } | undefined> {
  const [row] = await sql.query<{ session_id: string; branch: string }>(
    `select s.session_id, s.branch from session_sandboxes b join project_sessions s on s.session_id = b.session_id
      where b.sandbox_id = $1`,
    [sandboxId],
  );
  return row && { sessionId: row.session_id, branch: row.branch };
}
