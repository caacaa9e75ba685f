import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Project } from "../../protocol/project.ts";
import type { AccountStore } from "../accounts/store.ts";
import { isUuid, type ProjectStore } from "../projects/store.ts";
import { AUDITED, type AuditRule, bodyId, fieldNames } from "./actions.ts";
import type { AuditEntry, AuditLog } from "./store.ts";

export type AuditHookDeps = { audit: AuditLog; accounts: AccountStore; projects: ProjectStore };

type Body = Record<string, unknown>;

/** Who acted, and how: a person's login (token or dashboard), a project token a person minted, or a sandbox. */
function actorOf(req: FastifyRequest): AuditEntry["actor"] | undefined {
  const principal = req.principal;
  if (principal?.kind === "user") return { userId: principal.userId, kind: "user" };
  if (principal?.kind === "project")
    return { userId: principal.userId, kind: principal.sandbox ? "sandbox" : "project_token" };
  if (req.browserSession) return { userId: req.browserSession.userId, kind: "user" };
  return undefined;
}

/**
 * Whether the act was done: a 2xx, or on the dashboard the 303 a form's success answers with (post/redirect/get;
 * without a browser session the 303 is the way to the sign-in page, and there is no actor).
 */
const succeeded = (req: FastifyRequest, status: number) =>
  (status >= 200 && status < 300) || (status === 303 && req.routeOptions.url?.startsWith("/dashboard/") === true);

/** The `id` of what the answer created; nothing else of the answer (a minted token's secret is in it) is read. */
function createdId(payload: unknown): string | null {
  if (typeof payload !== "string") return null;
  try {
    const id = (JSON.parse(payload) as { id?: unknown } | null)?.id;
    return typeof id === "string" && isUuid(id) ? id : null;
  } catch {
    return null;
  }
}

/**
 * The audit log's one writer for requests: every route of AUDITED that succeeded is recorded before its answer
 * leaves, with the actor, the route's resource id and the names its rule keeps; a failure to record is logged and
 * never fails the request. Register on the root instance before the routes, so it covers them all.
 */
export function registerAudit(app: FastifyInstance, deps: AuditHookDeps): void {
  /** The project of a project route: the auth hook's, or (a dashboard page, authorized by its handler) its `:projectId`. */
  async function projectOf(req: FastifyRequest, userId: string): Promise<Project | undefined> {
    if (req.project) return req.project;
    const ref = (req.params as { projectId?: string }).projectId;
    if (!ref) return undefined;
    if (isUuid(ref)) return deps.projects.byId(ref);
    const accounts = await deps.accounts.accounts(userId);
    return (
      await deps.projects.bySlug(
        ref,
        accounts.map((a) => a.id),
      )
    )[0];
  }

  async function accountsOf(rule: AuditRule, req: FastifyRequest, userId: string, project: Project | undefined) {
    if (rule.scope === "project") return project ? [project.account_id] : [];
    const accounts = await deps.accounts.accounts(userId);
    if (rule.scope === "user") return accounts.map((a) => a.id);
    // The account route's account; a dashboard page acts on the person's first, as its handler does.
    return [req.account?.id ?? accounts[0]?.id].filter((id): id is string => id !== undefined);
  }

  function resourceId(rule: AuditRule, req: FastifyRequest, body: Body, payload: unknown): string | null {
    if (!rule.id) return null;
    if ("param" in rule.id) return (req.params as Record<string, string | undefined>)[rule.id.param] ?? null;
    if ("created" in rule.id) return createdId(payload);
    return bodyId(body, rule.id.body);
  }

  app.addHook("onSend", async (req, reply, payload) => {
    const rule = AUDITED[`${req.method} ${req.routeOptions.url}`];
    if (!rule || !succeeded(req, reply.statusCode)) return payload;
    const actor = actorOf(req);
    if (!actor) return payload;
    const body = (req.body ?? {}) as Body;
    const action = typeof rule.action === "string" ? rule.action : rule.action(body);
    try {
      const project = rule.scope === "project" ? await projectOf(req, actor.userId) : undefined;
      const id = resourceId(rule, req, body, payload);
      await deps.audit.record({
        accountIds: await accountsOf(rule, req, actor.userId, project),
        actor,
        action,
        resource: { type: rule.resource, id },
        projectId: project?.id ?? (rule.resource === "project" ? id : null),
        requestId: req.id,
        clientAddress: req.ip,
        status: reply.statusCode,
        details: { fields: fieldNames(body), ...rule.names?.(body) },
      });
    } catch (err) {
      req.log.error({ action, error: (err as Error).message }, "could not record an audit entry");
    }
    return payload;
  });
}
