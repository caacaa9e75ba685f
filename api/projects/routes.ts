import type { FastifyInstance } from "fastify";
import { CreateProjectBody, type Project } from "../../protocol/project.ts";
import { MintProjectTokenBody } from "../../protocol/token.ts";
import type { AccountStore } from "../accounts/store.ts";
import { actingUserId, personalUserId } from "../auth/authenticate.ts";
import type { TokenStore } from "../auth/token-store.ts";
import { apiError } from "../errors.ts";
import type { RemoteAddressCheck } from "../git/remote-address.ts";
import type { Repositories } from "../git/repositories.ts";
import { parseInput } from "../http/validate.ts";
import { activeAccount, namedAccount } from "../people/active-account.ts";
import { type ProjectStore, slugify } from "./store.ts";

/** A repository URL as listings show it: credentials embedded by the user never leave the API. */
export function redactRepoUrl(url: string | null): string | null {
  if (!url || !/^[a-z+]+:\/\//i.test(url)) return url;
  try {
    const parsed = new URL(url);
    if (!parsed.password && !parsed.username) return url;
    if (parsed.password) parsed.password = "***";
    else parsed.username = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}

const present = (project: Project): Project => ({ ...project, repo_url: redactRepoUrl(project.repo_url) });

export type ProjectRouteDeps = {
  accounts: AccountStore;
  projects: ProjectStore;
  tokens: TokenStore;
  repos: Repositories;
  checkRepoUrl: RemoteAddressCheck;
};

export function projectRoutes(deps: ProjectRouteDeps) {
  return async (app: FastifyInstance) => {
    app.get("/v1/projects", { config: { auth: "principal" } }, async (req) => {
      const principal = req.principal!;
      if (principal.kind === "project") {
        const own = await deps.projects.byId(principal.projectId);
        return { projects: own ? [present(own)] : [] };
      }
      // The active account's (`svc projects ls`: SPEC); a person of no account has none.
      const userId = actingUserId(principal);
      const named = namedAccount(req);
      if (named === undefined && (await deps.accounts.accounts(userId)).length === 0) return { projects: [] };
      const account = await activeAccount(deps.accounts, userId, named);
      return { projects: (await deps.projects.listForAccounts([account.id])).map(present) };
    });

    // In the account `account_id` names, else the active one: the one the auth hook checked the role in.
    app.post("/v1/projects", { config: { auth: "account" } }, async (req, reply) => {
      const body = parseInput(CreateProjectBody, req.body, "body");
      const userId = actingUserId(req.principal!);
      const account = req.account!;
      if (body.repo_url) {
        // Before anything is stored or fetched: git connects nowhere for a URL refused here.
        const verdict = await deps.checkRepoUrl(body.repo_url);
        if (!verdict.ok)
          throw apiError("REPO_URL_FORBIDDEN", `repo_url refused: ${verdict.reason}`, { field: "repo_url" });
      }
      const project = await deps.projects.create({
        accountId: account.id,
        name: body.name,
        slug: body.slug ?? slugify(body.name),
        repoKind: body.repo_url ? "external" : "managed",
        repoUrl: body.repo_url ?? null,
        defaultBranch: body.default_branch ?? "main",
        createdBy: userId,
      });
      if (project.repo_kind === "managed") {
        try {
          await deps.repos.initManaged(project.id, project.default_branch);
        } catch (err) {
          // No project without its repository.
          await deps.projects.remove(project.id);
          throw err;
        }
      }
      return reply.code(201).send(present(project));
    });

    app.get("/v1/projects/:projectId", async (req) => present(req.project!));

    // A project token mints nothing: what an agent holds never begets a credential that outlives its sandbox.
    app.post("/v1/projects/:projectId/cli-token", async (req, reply) => {
      const userId = personalUserId(req.principal!, "mint tokens");
      const body = parseInput(MintProjectTokenBody, req.body ?? {}, "body");
      const minted = await deps.tokens.mint({
        userId,
        projectId: req.project!.id,
        name: body.name ?? "cli",
        expiresInDays: body.expires_in_days,
      });
      return reply.code(201).send(minted);
    });
  };
}
