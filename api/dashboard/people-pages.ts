import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { DisplayName, InviteBody, NewPassword, RoleChangeBody } from "../../protocol/member.ts";
import type { AccountStore } from "../accounts/store.ts";
import type { SignInAudit } from "../audit/sign-ins.ts";
import { ApiError, apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import { type Invitee, type Invites, invitePath, inviteRefusal, type OpenInvite } from "../people/invites.ts";
import type { Members } from "../people/members.ts";
import type { PasswordSignIn } from "../people/password-sign-in.ts";
import { hashPassword } from "../people/passwords.ts";
import type { Sso } from "../sso/sso.ts";
import { BROWSER_SESSION_TTL_MS, type BrowserSessions, sameToken } from "./browser-sessions.ts";
import { dashboardPath } from "./next-path.ts";
import { accountSwitch } from "./pages/account-switch.ts";
import { type InviteView, invitePage } from "./pages/invite.ts";
import { type MembersView, membersPage } from "./pages/members.ts";
import { errorPage } from "./pages/messages.ts";
import { signInPage } from "./pages/sign-in.ts";
import { requireCsrf, sessionCookie, sessionCookieValue } from "./session-auth.ts";

const HTML = "text/html; charset=utf-8";

const PasswordForm = z
  .object({ email: z.string().max(254), password: z.string().max(1024), next: z.string().max(2000).optional() })
  .strict();
const InviteParams = z.object({ token: z.string().min(1).max(100) });
/** An invite's forms: the signed-in addressee's Join (`_csrf`), a new user's, or a password user's sign-in. */
const InviteForm = z
  .object({
    _csrf: z.string().optional(),
    name: z.string().max(1000).optional(),
    email: z.string().max(254).optional(),
    password: z.string().max(1024).optional(),
    password_again: z.string().max(1024).optional(),
  })
  .strict();
/** The members page's invite and role-change forms. */
const EmailRoleForm = z.object({ _csrf: z.string(), email: z.string(), role: z.string() }).strict();
const RemoveForm = z.object({ _csrf: z.string(), email: z.string() }).strict();

export type PeoplePagesDeps = {
  accounts: AccountStore;
  members: Members;
  invites: Invites;
  passwordSignIn: PasswordSignIn;
  browserSessions: BrowserSessions;
  publicUrl: () => string;
  /** Single sign-on, when configured: the sign-in page offers it. */
  sso?: Sso;
  signInAudit: SignInAudit;
};

/** A browser that may or may not be signed in: its session, without sending it to the sign-in page. */
async function browserSessionOf(deps: PeoplePagesDeps, req: FastifyRequest) {
  const secret = sessionCookieValue(req.headers.cookie);
  return secret ? deps.browserSessions.lookup(secret) : undefined;
}

/** Why a sign-in form did not sign in, in the page's words: the same for a wrong email and a wrong password. */
const signInRefusal = (err: ApiError) =>
  err.code === "RATE_LIMITED" ? "Too many sign-in attempts: wait a minute and try again." : "Wrong email or password.";

/**
 * The dashboard's way in without the command line (register among its public pages): email and password sign-in,
 * and an invite's page, which creates the user (or signs an existing one in), adds the membership and signs the
 * browser in. Their forms have no session to carry a CSRF token: the dashboard's origin check (refuseOtherOrigins)
 * refuses them from any other site.
 */
export function peoplePublicPages(deps: PeoplePagesDeps) {
  const secure = () => deps.publicUrl().startsWith("https:");

  async function signIn(reply: FastifyReply, userId: string): Promise<void> {
    const { secret } = await deps.browserSessions.open(userId);
    reply.header("set-cookie", sessionCookie(secret, BROWSER_SESSION_TTL_MS / 1000, secure()));
  }

  async function inviteView(
    req: FastifyRequest,
    token: string,
    invite: OpenInvite,
    more: Pick<InviteView, "refusal" | "name"> = {},
  ): Promise<InviteView> {
    const session = await browserSessionOf(deps, req);
    const me = session && (await deps.accounts.user(session.userId));
    const { kind } = await deps.passwordSignIn.userState(invite.email);
    const signedIn = me && session ? { email: me.email, csrf: session.csrf } : undefined;
    return { path: invitePath(token), invite, user: kind, signedIn, ...more };
  }

  /** Who the invite's form says takes it up, proven: the signed-in user, a password's user, or a new user. */
  async function invitee(req: FastifyRequest, invite: OpenInvite, form: z.infer<typeof InviteForm>): Promise<Invitee> {
    if (form._csrf !== undefined) {
      const session = await browserSessionOf(deps, req);
      if (!session || !sameToken(form._csrf, session.csrf))
        throw apiError("FORBIDDEN", "This form has expired or did not come from this dashboard. Reload the page.");
      return { kind: "user", userId: session.userId };
    }
    if (form.email !== undefined && form.email.trim().toLowerCase() !== invite.email)
      throw apiError("INVITE_EMAIL_MISMATCH", `This invite is for ${invite.email} only.`);
    const user = await deps.passwordSignIn.userState(invite.email);
    if (user.kind === "password")
      return { kind: "user", userId: await deps.passwordSignIn.userId(invite.email, form.password ?? "", req.ip) };
    if (user.kind === "no-password")
      throw apiError("FORBIDDEN", `Sign in as ${invite.email} first, then open this invite again.`);
    const name = DisplayName.safeParse(form.name ?? "");
    if (!name.success)
      throw apiError("VALIDATION_FAILED", "Display name: one line of up to 200 characters.", { field: "name" });
    const password = NewPassword.safeParse(form.password ?? "");
    if (!password.success)
      throw apiError("VALIDATION_FAILED", `Password: ${password.error.issues[0]!.message}.`, { field: "password" });
    if (form.password_again !== password.data)
      throw apiError("VALIDATION_FAILED", "The two passwords differ: type the same one twice.", { field: "password" });
    return { kind: "new", name: name.data, passwordHash: await hashPassword(password.data) };
  }

  const invalidInvite = (reply: FastifyReply, err: ApiError) =>
    reply.code(err.status).type(HTML).send(errorPage("This invite is not valid", err.message));

  return async (app: FastifyInstance) => {
    app.post("/sign-in/password", async (req, reply) => {
      const form = parseInput(PasswordForm, req.body, "body");
      const next = dashboardPath(form.next ?? "") ?? "/dashboard";
      try {
        await signIn(reply, await deps.passwordSignIn.userId(form.email.trim().toLowerCase(), form.password, req.ip));
        return reply.redirect(next, 303);
      } catch (err) {
        if (!(err instanceof ApiError) || (err.code !== "UNAUTHENTICATED" && err.code !== "RATE_LIMITED")) throw err;
        const page = signInPage({ next, email: form.email, refusal: signInRefusal(err), sso: deps.sso !== undefined });
        return reply.code(err.status).type(HTML).send(page);
      }
    });

    app.get("/invites/:token", async (req, reply) => {
      const { token } = parseInput(InviteParams, req.params, "params");
      const found = await deps.invites.lookup(token);
      if (found.state !== "open") return invalidInvite(reply, inviteRefusal(found));
      return reply.type(HTML).send(invitePage(await inviteView(req, token, found.invite)));
    });

    app.post("/invites/:token", async (req, reply) => {
      const { token } = parseInput(InviteParams, req.params, "params");
      const form = parseInput(InviteForm, req.body, "body");
      const found = await deps.invites.lookup(token);
      if (found.state !== "open") return invalidInvite(reply, inviteRefusal(found));
      try {
        const { userId, accountId } = await deps.invites.accept(token, await invitee(req, found.invite, form));
        await deps.signInAudit.joined(userId, accountId, "invite", req);
        await signIn(reply, userId);
        return reply.redirect("/dashboard", 303);
      } catch (err) {
        if (!(err instanceof ApiError) || err.status >= 500) throw err;
        if (err.code === "INVITE_INVALID") return invalidInvite(reply, err);
        const refusal =
          err.code === "UNAUTHENTICATED" || err.code === "RATE_LIMITED" ? signInRefusal(err) : err.message;
        const view = await inviteView(req, token, found.invite, { refusal, name: form.name });
        return reply.code(err.status).type(HTML).send(invitePage(view));
      }
    });
  };
}

/**
 * `/dashboard/members` (register among the signed-in pages): the account's members, and for its admins the
 * invite form (its link shown once), role changes and removal, through the same service as `svc members`.
 */
export function memberPages(deps: PeoplePagesDeps) {
  const view = async (req: FastifyRequest, more: Pick<MembersView, "invited" | "refusal"> = {}) => {
    const account = req.account!;
    const mine = await deps.accounts.accounts(req.browserSession!.userId);
    const switcher = accountSwitch(account, mine, req.browserSession!.csrf, "/dashboard/members");
    return { account, members: await deps.members.list(account.id), switcher, ...more };
  };

  /** A refusal a person can act on comes back on the page; nothing changed. */
  const refused = async (req: FastifyRequest, reply: FastifyReply, err: unknown) => {
    if (!(err instanceof ApiError) || err.status >= 500) throw err;
    const page = membersPage(await view(req, { refusal: err.message }), req.browserSession!.csrf);
    return reply.code(err.status).type(HTML).send(page);
  };

  return async (app: FastifyInstance) => {
    app.get("/members", async (req, reply) =>
      reply.type(HTML).send(membersPage(await view(req), req.browserSession!.csrf)),
    );

    app.post("/members/invites", { preHandler: requireCsrf }, async (req, reply) => {
      const form = parseInput(EmailRoleForm, req.body, "body");
      try {
        const body = parseInput(InviteBody, { email: form.email, role: form.role }, "body");
        const userId = req.browserSession!.userId;
        const invited = await deps.members.invite(req.account!, userId, body);
        // The link is in this answer only (its token is stored hashed): no redirect, whose page could not show it.
        return reply.type(HTML).send(membersPage(await view(req, { invited }), req.browserSession!.csrf));
      } catch (err) {
        return refused(req, reply, err);
      }
    });

    app.post("/members/role", { preHandler: requireCsrf }, async (req, reply) => {
      const form = parseInput(EmailRoleForm, req.body, "body");
      try {
        const { role } = parseInput(RoleChangeBody, { role: form.role }, "body");
        await deps.members.changeRole(req.account!, form.email.trim().toLowerCase(), role);
        return reply.redirect("/dashboard/members", 303);
      } catch (err) {
        return refused(req, reply, err);
      }
    });

    app.post("/members/remove", { preHandler: requireCsrf }, async (req, reply) => {
      const form = parseInput(RemoveForm, req.body, "body");
      try {
        await deps.members.remove(req.account!, form.email.trim().toLowerCase());
        return reply.redirect("/dashboard/members", 303);
      } catch (err) {
        return refused(req, reply, err);
      }
    });
  };
}
