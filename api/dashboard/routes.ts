import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { AccountRole } from "../../protocol/account.ts";
import { CommitSha } from "../../protocol/change-request.ts";
import type { Forwarder } from "../../protocol/http-forward.ts";
import type { Project } from "../../protocol/project.ts";
import { CreateSessionBody, Session } from "../../protocol/session.ts";
import { SafeText } from "../../protocol/text.ts";
import { TriggerParams } from "../../protocol/trigger.ts";
import type { AppService } from "../apps/service.ts";
import type { ApprovalService } from "../change-requests/approvals.ts";
import type { CommentService } from "../change-requests/comments.ts";
import type { ChangeRequestService } from "../change-requests/service.ts";
import { shownRun } from "../checks/store.ts";
import { ApiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import { activeAccount } from "../people/active-account.ts";
import { listSecrets } from "../secrets/listing.ts";
import type { SecretStore } from "../secrets/store.ts";
import { type SessionAccessDeps, sessionsOf } from "../sessions/session-access.ts";
import type { SessionStore } from "../sessions/store.ts";
import type { TranscriptStore } from "../sessions/transcript-store.ts";
import type { TriggerService } from "../triggers/service.ts";
import { type AuditPagesDeps, auditPages } from "./audit-pages.ts";
import { BROWSER_SESSION_TTL_MS, type BrowserSessions } from "./browser-sessions.ts";
import { cliLoginRoutes } from "./cli-login.ts";
import { crApprovalPages } from "./cr-approval-pages.ts";
import { crCheckPages } from "./cr-check-pages.ts";
import { crCommentPages } from "./cr-comment-pages.ts";
import { STYLESHEET_PATH } from "./layout.ts";
import { dashboardPath } from "./next-path.ts";
import { type ChangeRequestView, type CrViewer, changeRequestPage, type LineTarget } from "./pages/change-request.ts";
import { badSignInLinkPage, errorPage, signInConfirmPage } from "./pages/messages.ts";
import { noModelPage } from "./pages/no-model.ts";
import { type ProjectView, projectPage } from "./pages/project.ts";
import { projectsPage } from "./pages/projects.ts";
import { signInPage } from "./pages/sign-in.ts";
import { settle } from "./part.ts";
import { memberPages, type PeoplePagesDeps, peoplePublicPages } from "./people-pages.ts";
import { ACCOUNT_COOKIE, browserProject, requireAccountRole } from "./project-access.ts";
import { SECURITY_HEADERS } from "./security-headers.ts";
import {
  clearedSessionCookie,
  refuseOtherOrigins,
  requireBrowserSession,
  requireCsrf,
  sessionCookie,
} from "./session-auth.ts";
import { sessionPages } from "./session-pages.ts";
import { signInCodeUser } from "./sign-in-links.ts";
import { STYLESHEET } from "./stylesheet.ts";

export type DashboardDeps = SessionAccessDeps &
  PeoplePagesDeps &
  AuditPagesDeps & {
    browserSessions: BrowserSessions;
    apps: AppService;
    changeRequests: ChangeRequestService;
    comments: CommentService;
    approvals: ApprovalService;
    sessionStore: SessionStore;
    transcripts: TranscriptStore;
    secrets: SecretStore;
    manifests: ManifestReader;
    triggers: TriggerService;
  };

const HTML = "text/html; charset=utf-8";

const SignInQuery = z.object({
  code: z.string().max(200).optional(),
  next: z.string().max(2000).optional(),
  signed_out: z.string().optional(),
});
const SignInForm = z.object({ code: z.string().max(200), next: z.string().max(2000).optional() }).strict();
const CrParams = z.object({ projectId: z.string(), crId: z.string().min(1).max(64) });
/** A click on a diff line: the CR page with that line's comment form open. */
const CrPageQuery = z.object({
  path: z.string().max(4096).optional(),
  line: z.coerce.number().int().positive().optional(),
});
/** The project page's "New session" form: the base as typed; the prompt may stay empty. */
const NewSessionForm = z
  .object({ _csrf: z.string(), prompt: z.string().max(200_000).optional(), base_ref: z.string().max(255) })
  .strict();
const CsrfOnly = z.object({ _csrf: z.string() }).strict();
const AccountForm = z
  .object({ _csrf: z.string(), account: z.string().min(1).max(200), next: z.string().max(2000).optional() })
  .strict();
const ActionForm = z
  .object({ _csrf: z.string(), message: SafeText.max(10_000).optional(), head_sha: CommitSha.optional() })
  .strict();

/** A 409 of a CR action as a person reads it on the page. */
function refusal(err: ApiError): string {
  const conflicts = err.details.conflicts as string[] | undefined;
  if (conflicts?.length)
    return `Merge failed: ${conflicts.join(", ")} ${conflicts.length === 1 ? "has" : "have"} conflicts.`;
  if (typeof err.details.reason === "string") return `Merge failed: ${err.details.reason}.`;
  return err.message;
}

/**
 * The dashboard (register with prefix `/dashboard`): server-rendered pages behind a browser session (cookie),
 * forms with a CSRF token, and the same services and membership checks as the REST routes.
 */
export function dashboardRoutes(deps: DashboardDeps, forward: Forwarder) {
  const secure = () => deps.publicUrl().startsWith("https:");

  const projectFor = (req: FastifyRequest) => browserProject(deps, req);

  async function crView(
    project: Project,
    crId: string,
    viewer: CrViewer,
    refused?: string,
    lineTarget?: LineTarget,
  ): Promise<ChangeRequestView> {
    const cr = await deps.changeRequests.get(project, crId);
    const [preview, diff, comments, checks, approvals] = await Promise.all([
      settle(deps.changeRequests.preview(project, cr.cr_id)),
      settle(deps.changeRequests.diff(project, cr.cr_id)),
      settle(deps.comments.list(project, cr.cr_id)),
      settle(deps.changeRequests.checks(project, cr.cr_id).then((runs) => runs.map(shownRun))),
      settle(deps.approvals.list(project, cr.cr_id)),
    ]);
    return {
      project,
      cr,
      preview,
      diff,
      refusal: refused,
      comments,
      checks,
      approvals,
      viewerId: viewer.userId,
      lineTarget,
    };
  }

  function renderError(err: FastifyError | ApiError, req: FastifyRequest, reply: FastifyReply) {
    const csrf = req.browserSession?.csrf;
    if (err instanceof ApiError && err.code === "MODEL_NOT_CONFIGURED") {
      // The chat's script posts JSON and shows the answer's `error`: the whole message, never a bare status text.
      if (req.headers["content-type"]?.startsWith("application/json"))
        return reply.code(err.status).send({ error: err.message, code: err.code });
      return reply.code(err.status).type(HTML).send(noModelPage(err.message, csrf));
    }
    if (err instanceof ApiError) {
      const title = err.status === 404 ? "Not found" : err.status === 403 ? "Refused" : "Something went wrong";
      return reply
        .code(err.status)
        .type(HTML)
        .send(errorPage(title, err.message, csrf));
    }
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) req.log.error({ err }, "dashboard page failed");
    const message = status === 500 ? "Internal error: the server's log has the details." : "The request was malformed.";
    return reply
      .code(status)
      .type(HTML)
      .send(errorPage("Something went wrong", message, csrf));
  }

  /** Pages anyone may see: the sign-in exchange and the stylesheet. */
  async function publicPages(app: FastifyInstance) {
    // A link's GET only asks (login CSRF: a link planted elsewhere would sign the browser in as someone else);
    // the page's Continue posts the code, which refuseOtherOrigins admits from this origin only.
    app.get("/sign-in", async (req, reply) => {
      const query = parseInput(SignInQuery, req.query, "query");
      const next = dashboardPath(query.next ?? "") ?? "/dashboard";
      if (!query.code)
        return reply
          .type(HTML)
          .send(signInPage({ next, signedOut: query.signed_out !== undefined, sso: deps.sso !== undefined }));
      const userId = await signInCodeUser(deps.sql, query.code);
      const me = userId && (await deps.accounts.me(userId));
      if (!me) return reply.code(401).type(HTML).send(badSignInLinkPage());
      const page = signInConfirmPage({
        email: me.user.email,
        account: me.account.name,
        days: BROWSER_SESSION_TTL_MS / 86_400_000,
        code: query.code,
        next,
      });
      return reply.type(HTML).send(page);
    });

    app.post("/sign-in", async (req, reply) => {
      const form = parseInput(SignInForm, req.body, "body");
      const userId = await deps.browserSessions.redeemCode(form.code);
      if (!userId) return reply.code(401).type(HTML).send(badSignInLinkPage());
      const { secret } = await deps.browserSessions.open(userId);
      reply.header("set-cookie", sessionCookie(secret, BROWSER_SESSION_TTL_MS / 1000, secure()));
      return reply.redirect(dashboardPath(form.next ?? "") ?? "/dashboard", 303);
    });

    await app.register(peoplePublicPages(deps));

    app.get(STYLESHEET_PATH.slice("/dashboard".length), async (_req, reply) =>
      reply.type("text/css; charset=utf-8").header("cache-control", "public, max-age=300").send(STYLESHEET),
    );
  }

  async function signedInPages(app: FastifyInstance) {
    app.addHook("preHandler", requireBrowserSession(deps.browserSessions));
    app.addHook("preHandler", requireAccountRole(deps));

    app.get("/", async (req, reply) => {
      const accounts = await deps.accounts.accounts(req.browserSession!.userId);
      const projects = await deps.projects.listForAccounts(accounts.map((a) => a.id));
      return reply.type(HTML).send(projectsPage(projects, req.browserSession!.csrf));
    });

    async function projectView(project: Project, role: AccountRole, refusal?: string): Promise<ProjectView> {
      const [sessions, changeRequests, secrets, triggers, apps] = await Promise.all([
        settle(deps.sessionStore.list(project.id).then((rows) => rows.map((s) => Session.parse(s)))),
        deps.changeRequests.list(project, { status: "all" }),
        settle(listSecrets(deps, project)),
        settle(deps.triggers.list(project)),
        settle(deps.apps.list(project)),
      ]);
      return { project, role, sessions, changeRequests, secrets, triggers, apps, refusal };
    }

    app.get("/projects/:projectId", async (req, reply) => {
      const project = await projectFor(req);
      return reply.type(HTML).send(projectPage(await projectView(project, req.role!), req.browserSession!.csrf));
    });

    /**
     * Starts a session (the "New session" form) or fires a trigger now, then shows the session; a refusal a person
     * can act on (the session cap, a bad base branch, a trigger gone from svc.toml) comes back on the project page.
     */
    const startsSession =
      (start: (req: FastifyRequest, project: Project) => Promise<{ session_id: string }>) =>
      async (req: FastifyRequest, reply: FastifyReply) => {
        const project = await projectFor(req);
        try {
          const session = await start(req, project);
          return reply.redirect(`/dashboard/projects/${project.id}/sessions/${session.session_id}`, 303);
        } catch (err) {
          if (!(err instanceof ApiError) || err.status >= 500) throw err;
          const view = await projectView(project, req.role!, err.message);
          return reply.code(err.status).type(HTML).send(projectPage(view, req.browserSession!.csrf));
        }
      };

    app.post(
      "/projects/:projectId/sessions",
      { preHandler: requireCsrf },
      startsSession(async (req, project) => {
        const form = parseInput(NewSessionForm, req.body, "body");
        const body = parseInput(
          CreateSessionBody,
          { prompt: form.prompt || undefined, base_ref: form.base_ref },
          "body",
        );
        return sessionsOf(deps).create(project, body, req.browserSession!.userId);
      }),
    );

    app.post(
      "/projects/:projectId/triggers/:slug/fire",
      { preHandler: requireCsrf },
      startsSession(async (req, project) => {
        parseInput(CsrfOnly, req.body, "body");
        const { slug } = parseInput(TriggerParams, req.params, "params");
        return deps.triggers.fireNow(project, slug);
      }),
    );

    app.get("/projects/:projectId/crs/:crId", async (req, reply) => {
      const project = await projectFor(req);
      const { crId } = parseInput(CrParams, req.params, "params");
      const { path, line } = parseInput(CrPageQuery, req.query, "query");
      const lineTarget = path && line ? { path, line } : undefined;
      return reply
        .type(HTML)
        .send(
          changeRequestPage(
            await crView(project, crId, req.browserSession!, undefined, lineTarget),
            req.browserSession!.csrf,
          ),
        );
    });

    for (const action of ["merge", "close", "reopen"] as const) {
      app.post(`/projects/:projectId/crs/:crId/${action}`, { preHandler: requireCsrf }, async (req, reply) => {
        const project = await projectFor(req);
        const { crId } = parseInput(CrParams, req.params, "params");
        const form = parseInput(ActionForm, req.body, "body");
        const userId = req.browserSession!.userId;
        const message = form.message?.trim() || undefined;
        try {
          const cr =
            action === "merge"
              ? await deps.changeRequests.merge(project, crId, userId, { message, headSha: form.head_sha })
              : action === "close"
                ? await deps.changeRequests.close(project, crId, userId)
                : await deps.changeRequests.reopen(project, crId);
          // Post/redirect/get: a reload shows the page again rather than repeating the action.
          return reply.redirect(`/dashboard/projects/${project.id}/crs/${cr.number}`, 303);
        } catch (err) {
          if (!(err instanceof ApiError) || err.status !== 409) throw err;
          const view = await crView(project, crId, req.browserSession!, refusal(err));
          return reply.code(409).type(HTML).send(changeRequestPage(view, req.browserSession!.csrf));
        }
      });
    }

    await app.register(sessionPages(deps, forward));
    await app.register(
      crCommentPages({
        ...deps,
        renderCr: async (project, crId, viewer, refused, lineTarget) =>
          changeRequestPage(await crView(project, crId, viewer, refused, lineTarget), viewer.csrf),
      }),
    );
    await app.register(
      crCheckPages({
        ...deps,
        renderCr: async (project, crId, viewer, refused) =>
          changeRequestPage(await crView(project, crId, viewer, refused), viewer.csrf),
      }),
    );
    await app.register(
      crApprovalPages({
        ...deps,
        renderCr: async (project, crId, viewer, refused) =>
          changeRequestPage(await crView(project, crId, viewer, refused), viewer.csrf),
      }),
    );
    await app.register(cliLoginRoutes(deps));
    await app.register(memberPages(deps));
    await app.register(auditPages(deps));

    // Which account the account pages show: a member of it only (403 NOT_A_MEMBER otherwise), kept by this browser.
    app.post("/account", { preHandler: requireCsrf }, async (req, reply) => {
      const form = parseInput(AccountForm, req.body, "body");
      const account = await activeAccount(deps.accounts, req.browserSession!.userId, form.account);
      reply.header(
        "set-cookie",
        `${ACCOUNT_COOKIE}=${encodeURIComponent(account.slug)}; Path=/dashboard; HttpOnly; SameSite=Lax${secure() ? "; Secure" : ""}`,
      );
      return reply.redirect(dashboardPath(form.next ?? "") ?? "/dashboard", 303);
    });

    app.post("/sign-out", { preHandler: requireCsrf }, async (req, reply) => {
      await deps.browserSessions.end(req.browserSession!.id);
      reply.header("set-cookie", clearedSessionCookie(secure()));
      return reply.redirect("/dashboard/sign-in?signed_out=1", 303);
    });
  }

  return async (app: FastifyInstance) => {
    // The dashboard authenticates with its cookie, not a bearer: the API-wide token check stands aside.
    app.addHook("onRoute", (route) => {
      route.config = { ...route.config, auth: "public" };
    });
    app.decorateRequest("browserSession", null);
    app.addHook("onRequest", refuseOtherOrigins);
    // HTML forms post urlencoded fields; nothing else of the API accepts them.
    app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) =>
      done(null, Object.fromEntries(new URLSearchParams(String(body)))),
    );
    app.addHook("onSend", async (_req, reply) => {
      for (const [name, value] of Object.entries(SECURITY_HEADERS))
        if (!reply.hasHeader(name)) reply.header(name, value);
    });
    app.setErrorHandler(renderError);
    app.setNotFoundHandler((req, reply) =>
      reply
        .code(404)
        .type(HTML)
        .send(errorPage("Not found", "There is no such page.", req.browserSession?.csrf)),
    );
    await app.register(publicPages);
    await app.register(signedInPages);
  };
}
