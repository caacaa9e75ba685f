import type { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { hashSecret } from "../../protocol/credential.ts";
import type { CloneCredential } from "../../protocol/git.ts";
import { CLONE_CREDENTIAL_PREFIX } from "../../protocol/token.ts";
import type { AccountStore } from "../accounts/store.ts";
import { type AuthDeps, authorizeProject, resolvePrincipal } from "../auth/authenticate.ts";
import { ApiError } from "../errors.ts";
import { redactRepoUrl } from "../projects/routes.ts";
import { isUuid, type ProjectStore } from "../projects/store.ts";
import type { CloneCredentials } from "./clone-credentials.ts";
import { type PushCredential, sessionBranchOf } from "./hooks.ts";
import { runHttpBackend } from "./http-backend.ts";
import type { Repositories } from "./repositories.ts";

export type GitRouteDeps = AuthDeps & {
  accounts: AccountStore;
  projects: ProjectStore;
  repos: Repositories;
  cloneCredentials: CloneCredentials;
  reposDir: string;
  hooksDir: string;
  /** Told after a push to a managed repository was received (a person may have moved the default branch). */
  onPushed?: (projectId: string) => void;
};

/** Only the smart protocol's three endpoints: no dumb-HTTP file access into the repository. */
const SERVICES = new Set(["info/refs", "git-upload-pack", "git-receive-pack"]);
const GIT_USERNAME = "x-svc";

function secretFrom(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const basic = /^Basic\s+(\S+)$/i.exec(header);
  if (basic) {
    const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
    return decoded.slice(decoded.indexOf(":") + 1) || undefined;
  }
  return /^Bearer\s+(\S+)$/i.exec(header)?.[1];
}

function deny(reply: FastifyReply, status: number, message: string) {
  const headers: Record<string, string> = { "content-type": "text/plain; charset=utf-8" };
  // 401 with a Basic challenge is what makes git ask its credential helper.
  if (status === 401) headers["www-authenticate"] = 'Basic realm="svc"';
  return reply.code(status).headers(headers).send(`${message}\n`);
}

type GitAccess =
  | { ok: true; userId: string; role: "user" | "sandbox"; credential?: PushCredential }
  | { ok: false; status: number; message: string };

/** Who is talking to git, and whether they may push the default branch (a person) or not (a sandbox). */
async function gitAccess(deps: GitRouteDeps, secret: string, projectId: string): Promise<GitAccess> {
  if (secret.startsWith(CLONE_CREDENTIAL_PREFIX)) {
    const grant = await deps.cloneCredentials.lookup(secret);
    if (!grant) return { ok: false, status: 401, message: "clone credential expired or unknown" };
    if (grant.projectId !== projectId) return { ok: false, status: 403, message: "credential is for another project" };
    return { ok: true, userId: grant.userId, role: "sandbox", credential: { cloneCredentialHash: hashSecret(secret) } };
  }
  try {
    const principal = await resolvePrincipal(deps, secret);
    await authorizeProject(deps, principal, projectId, false);
    if (principal.kind === "service") throw new Error("unreachable: service keys are refused above");
    if (principal.kind === "user") return { ok: true, userId: principal.userId, role: "user" };
    return { ok: true, userId: principal.userId, role: "sandbox", credential: { tokenId: principal.tokenId } };
  } catch (err) {
    if (err instanceof ApiError) return { ok: false, status: err.status, message: err.message };
    throw err;
  }
}

export function gitRoutes(deps: GitRouteDeps) {
  return async (app: FastifyInstance) => {
    // Pack bodies stream straight into git: no parsing, no buffering, no body limit of the JSON API.
    app.addContentTypeParser(
      ["application/x-git-upload-pack-request", "application/x-git-receive-pack-request"],
      (_req, payload, done) => done(null, payload),
    );

    app.route({
      method: ["GET", "POST"],
      url: "/git/:repo/*",
      config: { auth: "public" },
      handler: async (req, reply) => {
        const { repo, "*": rest } = req.params as { repo: string; "*": string };
        const projectId = repo.replace(/\.git$/, "");
        if (!isUuid(projectId) || !SERVICES.has(rest)) return deny(reply, 404, "not found");
        const secret = secretFrom(req);
        if (!secret) return deny(reply, 401, "authentication required: use a svc token as the password");
        const who = await gitAccess(deps, secret, projectId);
        if (!who.ok) return deny(reply, who.status, who.message);
        const project = await deps.projects.byId(projectId);
        if (project?.repo_kind !== "managed") return deny(reply, 404, "no managed repository for this project");

        // The one branch a sandbox may delete: looked up for pushes only.
        const pushBranch =
          rest === "git-receive-pack" && who.credential ? await sessionBranchOf(deps.sql, who.credential) : "";
        reply.hijack();
        const query = req.url.includes("?") ? req.url.slice(req.url.indexOf("?") + 1) : "";
        const exitCode = await runHttpBackend(
          {
            method: req.method,
            pathInfo: `/${projectId}.git/${rest}`,
            query,
            headers: req.headers,
            body: req.method === "POST" ? ((req.body as Readable | undefined) ?? req.raw) : undefined,
            remoteUser: who.userId,
            remoteAddr: req.ip,
          },
          reply.raw,
          {
            GIT_PROJECT_ROOT: deps.reposDir,
            SVC_PUSH_ROLE: who.role,
            SVC_PROTECTED_BRANCH: project.default_branch,
            SVC_PUSH_BRANCH: pushBranch,
            GIT_CONFIG_COUNT: "1",
            GIT_CONFIG_KEY_0: "core.hooksPath",
            GIT_CONFIG_VALUE_0: deps.hooksDir,
          },
        );
        if (rest === "git-receive-pack") {
          deps.repos.invalidate(project);
          if (exitCode === 0) deps.onPushed?.(project.id);
        }
      },
    });

    app.get("/v1/projects/:projectId/git/clone-credential", { config: { allowServiceKey: true } }, async (req) => {
      const principal = req.principal!;
      const project = req.project!;
      // Minted for a sandbox (its daemon's service key, or its session token): bound to that sandbox.
      const grant =
        principal.kind === "service"
          ? {
              projectId: project.id,
              userId: await sandboxOwner(deps, principal.sessionId),
              sandboxId: principal.sandboxId,
            }
          : {
              projectId: project.id,
              userId: principal.userId,
              sandboxId: principal.kind === "project" ? principal.sandbox?.sandboxId : undefined,
            };
      const { secret, expiresAt } = await deps.cloneCredentials.mint(grant);
      return {
        username: GIT_USERNAME,
        password: secret,
        repo_url: redactRepoUrl(project.repo_url) ?? "",
        expires_at: expiresAt.toISOString(),
      } satisfies CloneCredential;
    });
  };
}

async function sandboxOwner(deps: GitRouteDeps, sessionId: string): Promise<string> {
  const [row] = await deps.sql.query<{ created_by: string }>(
    "select created_by from project_sessions where session_id = $1",
    [sessionId],
  );
  return row!.created_by;
}
