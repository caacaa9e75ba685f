/** What `svc init` writes. Each file is a starting point the project owns and edits through CRs. */

export function manifest(name: string): string {
  return `# svc project manifest. Changes reach the scheduler and future sessions only after a CR merges.
[project]
name = ${JSON.stringify(name)}

[agent]
# The agent a session starts with, and where its configuration lives in this repository.
name = "build"
config_dir = ".svc/agent"
# model = "provider/model"

# Secrets this project expects (values live in the secrets manager: svc secrets set NAME=...).
[env]
# OPENAI_API_KEY = { required = true, description = "model key for the agent" }

# Sessions started on a schedule (svc triggers ls). Edits take effect once their CR merges. Example:
# [[triggers]]
# slug = "nightly-deps"            # lowercase letters, digits and '-'; unique in this file
# schedule = "0 3 * * *"           # cron: minute hour day month weekday (a 6th field first = seconds)
# timezone = "Europe/Berlin"       # optional IANA time zone
# prompt = "Update dependencies and open a change request."
# enabled = true                   # optional, default true
# base_ref = "main"                # optional, default the default branch
# agent = "build"                  # optional, default [agent].name

# Long-running apps (svc apps ls), deployed from the default branch: a merge that changes one redeploys it,
# an open CR changes nothing. Each answers at http://<name>--<project id>.<preview domain>. Example:
# [[apps]]
# name = "web"                     # lowercase letters, digits and '-' (no '--'), at most 24; unique in this file
# build = ".svc/Dockerfile"        # optional Dockerfile; when the file does not exist the platform image runs it
# context = "."                    # optional build context (a directory of the repository)
# command = "npm start"            # optional, run by sh -c in /workspace, which holds the repository's files at
#                                  # the deployed revision; default the image's CMD
# port = 3000                      # the port the app listens on (it also gets PORT)
# env = ["DATABASE_URL"]           # optional project secrets it gets as env vars
# health_path = "/"                # must answer 2xx before traffic switches to a new deploy
`;
}

export const DOCKERFILE = `# The session sandbox for this project. The platform builds it when this folder changes on the default branch
# (only a merged change is ever built).
ARG SVC_BASE_IMAGE=svc-sandbox:latest
FROM \${SVC_BASE_IMAGE}

# Add what the agent needs to build and test this project, for example:
# RUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*
`;

export const AGENT_CONFIG = `${JSON.stringify(
  {
    $schema: "https://opencode.ai/config.json",
    default_agent: "build",
    permission: { edit: "allow", bash: "allow", webfetch: "allow" },
    autoupdate: false,
    share: "disabled",
  },
  null,
  2,
)}
`;

export const DEFAULT_AGENT = `---
description: Works on this repository in an svc session and lands changes through a change request.
mode: primary
---
You work inside an svc session sandbox on the session branch. Follow the svc-change-requests skill:
commit in small steps, push with \`git push origin HEAD\`, open a change request with \`svc cr open\`, and stop.
Never push to the default branch and never merge your own change request.
`;

export const CR_SKILL = `---
name: svc-change-requests
description: How work leaves an svc session: commits on the session branch, then a change request a person merges.
---
# Landing work with svc change requests

Every change reaches the default branch only through a change request (CR): code, new files, manifests,
instructions, tool and server configs alike. There is no exemption for small changes.

1. Commit on the session branch in small commits. Never rewrite history or force-push.
2. Push: \`git push origin HEAD\`.
3. Open the CR: \`svc cr open --title "<what and why>" --description "<details>"\`
   (head, base, session and project default from the sandbox environment).
4. Surface its number with \`svc cr ls\`, tell the user, and stop. Do not merge your own CR:
   the user merges it from the dashboard or with \`svc cr merge <n>\`.

If \`svc cr show <n>\` reports conflicts: merge the base branch into the session branch
(\`git fetch origin && git merge origin/<base>\`), resolve, commit, push, and run \`svc cr show <n>\` again until
the preview is clean. Then hand back to the user. Never merge a conflicted CR to force a resolution.
`;

/** `.svc/.gitignore`: the link file names this machine's host and project, so it stays out of the repository. */
export const SVC_GITIGNORE = `# Written by svc projects link / svc ship for this checkout only.
link.json
`;
