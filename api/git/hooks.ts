import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Server-side policy for pushes into managed repositories, run by receive-pack as `pre-receive`.
 * SVC_PUSH_ROLE is `user` for a person's token and `sandbox` for project tokens and clone credentials.
 * - The default branch changes only by CR merges: sandboxes cannot push it at all; people (`svc ship`) only
 *   fast-forward it and never delete it.
 * - Sandboxes never rewrite or delete a branch, so no pushed commit is ever lost.
 */
const PRE_RECEIVE = `#!/bin/sh
zero=0000000000000000000000000000000000000000
status=0
while read -r old new ref; do
  case "$ref" in
    "refs/heads/$SVC_PROTECTED_BRANCH")
      if [ "$SVC_PUSH_ROLE" != user ]; then
        echo "svc: $ref changes only by merging a change request (svc cr open, then svc cr merge)" >&2
        status=1
      elif [ "$new" = "$zero" ]; then
        echo "svc: the default branch cannot be deleted" >&2
        status=1
      elif [ "$old" != "$zero" ] && ! git merge-base --is-ancestor "$old" "$new"; then
        echo "svc: non-fast-forward push to $ref refused" >&2
        status=1
      fi
      ;;
    refs/heads/*)
      if [ "$SVC_PUSH_ROLE" != user ] && [ "$old" != "$zero" ]; then
        if [ "$new" = "$zero" ]; then
          echo "svc: sandboxes cannot delete branches" >&2
          status=1
        elif ! git merge-base --is-ancestor "$old" "$new"; then
          echo "svc: force-push to $ref refused: commits are never rewritten" >&2
          status=1
        fi
      fi
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
