import { basename, dirname } from "node:path";
import type { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type CloneCredential, checkpointRef } from "../../protocol/git.ts";
import type { Project } from "../../protocol/project.ts";
import { CLONE_CREDENTIAL_PREFIX } from "../../protocol/token.ts";
import type { AccountStore } from "../accounts/store.ts";
import { type AuthDeps, authorizeProject, resolvePrincipal } from "../auth/authenticate.ts";
import { requireRole } from "../auth/roles.ts";
import { leastRole } from "../auth/route-roles.ts";
import { ApiError, apiError } from "../errors.ts";
import type { Events } from "../events.ts";
import { redactRepoUrl } from "../projects/routes.ts";
import { isUuid, type ProjectStore } from "../projects/store.ts";
import type { SessionStore } from "../sessions/store.ts";
import type { CloneCredentials } from "./clone-credentials.ts";
import { sandboxSessionOf } from "./hooks.ts";
import { runHttpBackend } from "./http-backend.ts";
import { maxPushBytes, meteredPush, refuseOversizedPush } from "./push-limit.ts";
import { type Repositories, RepoUnavailableError } from "./repositories.ts";
import { configEnv, git } from "./run.ts";

export type GitRouteDeps = AuthDeps & {
  accounts: AccountStore;
  projects: ProjectStore;
  repos: Repositories;
  cloneCredentials: CloneCredentials;
  reposDir: string;
  hooksDir: string;
  /** `repo.pushed` after a push to a managed repository was received (it may have moved the default branch). */
  events: Events;
  publicUrl: () => string;
  /** The largest push accepted, in MB (SVC_GIT_MAX_PUSH_MB): a bigger one is refused before any ref moves. */
  maxPushMb: number;
  /** How long one git request (clone, fetch, push) may run before its git processes are ended. */
  requestDeadlineMs: number;
  sessionStore: Pick<SessionStore, "setCheckpoint">;
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
  | { ok: true; userId: string; role: "user" | "sandbox"; sandboxId?: string }
  | { ok: false; status: number; message: string };

/**
 * Who is talking to git: a sandbox (a credential bound to a running sandbox, which pushes its session branch
 * only) or a person (a user token, or a credential or project token a person minted outside any sandbox). Either
 * way the person it acts for must hold the least role of a push or a fetch in the project's account.
 */
async function gitAccess(deps: GitRouteDeps, secret: string, projectId: string, push: boolean): Promise<GitAccess> {
  const least = leastRole(push ? "PUSH /git/:repo.git" : "FETCH /git/:repo.git");
  try {
    if (secret.startsWith(CLONE_CREDENTIAL_PREFIX)) {
      const grant = await deps.cloneCredentials.lookup(secret);
      if (!grant) return { ok: false, status: 401, message: "clone credential expired or unknown" };
      if (grant.projectId !== projectId)
        return { ok: false, status: 403, message: "credential is for another project" };
      // Minted by a person or for their sandbox: what it may do is what that person may do now.
      const project = await deps.projects.byId(projectId);
      if (!project) return { ok: false, status: 404, message: "no repository for this project" };
      const role = await deps.accounts.role(grant.userId, project.account_id);
      if (!role) throw apiError("NOT_A_MEMBER", "this credential's person is no longer a member of the account");
      requireRole(role, least);
      return grant.sandboxId
        ? { ok: true, userId: grant.userId, role: "sandbox", sandboxId: grant.sandboxId }
        : { ok: true, userId: grant.userId, role: "user" };
    }
    const principal = await resolvePrincipal(deps, secret);
    await authorizeProject(deps, principal, projectId, least);
    if (principal.kind === "service") throw new Error("unreachable: service keys are refused above");
    if (principal.kind === "project" && principal.sandbox)
      return { ok: true, userId: principal.userId, role: "sandbox", sandboxId: principal.sandbox.sandboxId };
    return { ok: true, userId: principal.userId, role: "user" };
  } catch (err) {
    if (err instanceof ApiError) return { ok: false, status: err.status, message: err.message };
    throw err;
  }
}

/** What a push needs beyond git's own environment to reach an external remote from the hook (ssh, proxies, CAs). */
const RELAY_PASS_ENV = [
  "HOME",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "GIT_SSL_CAINFO",
  "GIT_SSH_COMMAND",
  "SSH_AUTH_SOCK",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
];

/** What the hook needs to push an accepted session branch on to the external remote (api/git/hooks.ts). */
async function relayEnv(deps: GitRouteDeps, project: Project, config: [string, string][]) {
  return {
    ...Object.fromEntries(RELAY_PASS_ENV.flatMap((k) => (process.env[k] ? [[k, process.env[k]!]] : []))),
    ...(await deps.repos.remoteEnv(project, config)),
    SVC_RELAY_URL: project.repo_url!,
  };
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
        const push = rest === "git-receive-pack" || (req.query as { service?: string }).service === "git-receive-pack";
        const who = await gitAccess(deps, secret, projectId, push);
        if (!who.ok) return deny(reply, who.status, who.message);
        const project = await deps.projects.byId(projectId);
        if (!project) return deny(reply, 404, "no repository for this project");
        const external = project.repo_kind === "external";
        if (external && push && who.role !== "sandbox") {
          return deny(
            reply,
            403,
            `svc relays only sandboxes' session branches to ${redactRepoUrl(project.repo_url)}: push there yourself`,
          );
        }
        if (external && rest !== "git-receive-pack") {
          // The mirror answers fetches and the refs a push starts from: fresh from the remote, as every CR read is.
          try {
            await deps.repos.open(project);
          } catch (err) {
            if (err instanceof RepoUnavailableError)
              return deny(reply, 502, "the project's repository cannot be reached");
            throw err;
          }
        }
        const receiving = rest === "git-receive-pack" && req.method === "POST";
        const body = (req.body as Readable | undefined) ?? req.raw;
        if (receiving && Number(req.headers["content-length"]) > maxPushBytes(deps.maxPushMb)) {
          reply.hijack();
          return refuseOversizedPush(reply.raw, body, deps.maxPushMb);
        }
        // A chunked push declares no length: counted as it streams, and git's own limit backs that up (a gzip body
        // inflates past its length).
        const metered = receiving ? meteredPush(body, deps.maxPushMb) : undefined;
        const hooks: [string, string][] = [
          ["core.hooksPath", deps.hooksDir],
          ["receive.maxInputSize", String(maxPushBytes(deps.maxPushMb))],
          // Sandboxes clone without old file contents and fetch one when a command needs it (daemon/workspace.ts).
          ["uploadpack.allowFilter", "true"],
          ["uploadpack.allowReachableSHA1InWant", "true"],
        ];
        // A sandbox pushes its session branch and its checkpoint ref, and sees no other session's checkpoint.
        const own = who.sandboxId ? await sandboxSessionOf(deps.sql, who.sandboxId) : undefined;
        if (own)
          hooks.push(["uploadpack.hideRefs", "refs/svc/"], ["uploadpack.hideRefs", `!${checkpointRef(own.sessionId)}`]);
        let hookEnv: Record<string, string>;
        try {
          hookEnv = external && rest === "git-receive-pack" ? await relayEnv(deps, project, hooks) : configEnv(hooks);
        } catch (err) {
          // The remote's host now resolves where no repository may be: nothing is relayed, nothing received.
          if (err instanceof RepoUnavailableError)
            return deny(reply, 502, "the project's repository cannot be reached");
          throw err;
        }
        const dir = deps.repos.dirOf(project);
        reply.hijack();
        const query = req.url.includes("?") ? req.url.slice(req.url.indexOf("?") + 1) : "";
        const { exitCode, failure } = await runHttpBackend(
          {
            method: req.method,
            pathInfo: `/${basename(dir)}/${rest}`,
            query,
            headers: req.headers,
            body: metered?.body ?? (req.method === "POST" ? body : undefined),
            remoteUser: who.userId,
            remoteAddr: req.ip,
            refusal: metered?.refusal,
          },
          reply.raw,
          {
            ...hookEnv,
            GIT_PROJECT_ROOT: dirname(dir),
            SVC_PUSH_ROLE: who.role,
            SVC_PROTECTED_BRANCH: project.default_branch,
            SVC_PUSH_BRANCH: own?.branch ?? "",
            SVC_PUSH_CHECKPOINT: own ? checkpointRef(own.sessionId) : "",
          },
          deps.requestDeadlineMs,
        );
        if (failure) req.log.error({ service: rest, failure }, "a git request failed");
        if (rest === "git-receive-pack") {
          deps.repos.invalidate(project);
          if (exitCode === 0) deps.events.emit("repo.pushed", { projectId: project.id });
          // A sandbox's push may have written or deleted its checkpoint: the session row says which.
          if (exitCode === 0 && own) {
            const { stdout } = await git(["rev-parse", "--verify", "--quiet", checkpointRef(own.sessionId)], {
              dir,
              okCodes: [1],
            });
            await deps.sessionStore.setCheckpoint(own.sessionId, stdout.trim() || null);
          }
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
        // Every project's sandboxes talk to the API's git endpoint, never to an external remote directly.
        repo_url: `${deps.publicUrl()}/git/${project.id}.git`,
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
