import type { ChangeRequest } from "../../protocol/change-request.ts";
import type { CrComment, CreateCrCommentBody } from "../../protocol/cr-comment.ts";
import { createKeyedMutex } from "../../protocol/keyed-mutex.ts";
import type { Project } from "../../protocol/project.ts";
import type { AccountStore } from "../accounts/store.ts";
import { apiError } from "../errors.ts";
import { shownLines } from "../git/diff-lines.ts";
import type { Repositories } from "../git/repositories.ts";
import { git } from "../git/run.ts";
import type { CrCommentStore, NewCrComment } from "./comments-store.ts";
import type { Feedback } from "./feedback.ts";
import { commentPrompt, excerpt, resolveNote, resolvePrompt } from "./feedback-prompt.ts";
import type { ChangeRequestService } from "./service.ts";

export type CommentServiceDeps = {
  changeRequests: ChangeRequestService;
  store: CrCommentStore;
  repos: Repositories;
  accounts: Pick<AccountStore, "user">;
  /** Prompts for CRs' agents; undefined on a server without a sandbox driver. */
  feedback: Feedback | undefined;
};

/** Who writes: a person (a user or project token, a browser), or a session's agent through its own token. */
export type Commenter = { userId: string; sessionId: string | null };

/** `1-4, 21-22`: the lines of a set, as ranges. */
function ranges(lines: Set<number>): string {
  const sorted = [...lines].sort((a, b) => a - b);
  const out: string[] = [];
  let start = sorted[0]!;
  for (let i = 1; i <= sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]! + 1) continue;
    out.push(start === sorted[i - 1] ? `${start}` : `${start}-${sorted[i - 1]}`);
    start = sorted[i]!;
  }
  return out.join(", ");
}

/**
 * Comments on a CR (DESIGN "The review loop on a CR"): general ones, or on a line its diff shows at the head it was
 * made on; one sent to the agent becomes a prompt for the CR's agent (feedback.ts), and so does `resolve`.
 */
export function createCommentService(deps: CommentServiceDeps) {
  const crs = deps.changeRequests;
  // One handoff at a time per CR: two quick prompts to a CR without an agent start one session, not two.
  const perCr = createKeyedMutex();

  const feedbackOf = () => {
    if (!deps.feedback)
      throw apiError("NOT_CONFIGURED", "sessions are unavailable: this server runs without a sandbox driver");
    return deps.feedback;
  };

  /** The head the comment's path and line belong to, checked against what the CR's diff shows there. */
  async function placeOf(project: Project, cr: ChangeRequest, body: CreateCrCommentBody) {
    if (body.path === undefined) return { path: null, line: null, headSha: cr.head_commit_sha };
    const diff = await crs.diff(project, cr.cr_id);
    const lines = shownLines(diff).get(body.path);
    if (!lines)
      throw apiError("VALIDATION_FAILED", `path: ${body.path} is not among the files CR #${cr.number} changes`, {
        field: "path",
      });
    if (body.line !== undefined && !lines.has(body.line)) {
      const shown = lines.size > 0 ? `it shows lines ${ranges(lines)}` : "it shows no line of it";
      throw apiError(
        "VALIDATION_FAILED",
        `line: line ${body.line} of ${body.path} is not in CR #${cr.number}'s diff (${shown})`,
        { field: "line" },
      );
    }
    return { path: body.path, line: body.line ?? null, headSha: diff.head_sha };
  }

  /** The commented line and its neighbours at the head; null when the file cannot be read there. */
  async function lineExcerpt(project: Project, headSha: string, path: string, line: number) {
    const dir = await deps.repos.open(project);
    const blob = await git(["cat-file", "blob", `${headSha}:${path}`], { dir }).catch(() => undefined);
    return blob ? excerpt(blob.stdout, line) : null;
  }

  /** Agents push to the head branch: a CR whose head branch is gone cannot be updated by one. */
  async function requireHeadBranch(project: Project, cr: ChangeRequest) {
    const tips = await deps.repos.tips(project);
    if (tips && !tips.has(cr.head_ref))
      throw apiError(
        "BRANCH_NOT_FOUND",
        `CR #${cr.number}'s head branch '${cr.head_ref}' no longer exists: no agent can update this CR`,
      );
  }

  /**
   * Hands `prompt` to the CR's agent, then stores the comment with the session that takes it (a refusal, such as
   * the session cap's, stores nothing), then delivers and records how that went.
   */
  const toAgent = (
    project: Project,
    cr: ChangeRequest,
    prompt: string,
    userId: string,
    comment: Omit<NewCrComment, "sessionId">,
  ) =>
    perCr(cr.cr_id, async () => {
      const handoff = await feedbackOf().handOff(project, cr, prompt, userId);
      const stored = await deps.store.create({ ...comment, sessionId: handoff.sessionId });
      handoff.deliver((outcome) =>
        outcome.delivered
          ? deps.store.setDelivery(stored.id, "delivered")
          : deps.store.setDelivery(stored.id, "failed", outcome.error),
      );
      return stored;
    });

  return {
    async list(project: Project, ref: string): Promise<CrComment[]> {
      return deps.store.list((await crs.load(project, ref)).cr_id);
    },

    async add(project: Project, ref: string, body: CreateCrCommentBody, who: Commenter): Promise<CrComment> {
      const cr = await crs.get(project, ref);
      // An agent answers on the CRs its own session opened; it neither speaks on others' nor prompts agents.
      if (who.sessionId !== null && cr.origin_session_id !== who.sessionId)
        throw apiError("SESSION_SCOPE", "a session's token comments only on the CRs its own session opened");
      if (who.sessionId !== null && body.to_agent)
        throw apiError("SESSION_SCOPE", "a session's token cannot send comments to an agent");
      // A merged CR is frozen: its branch no longer updates it.
      if (body.to_agent && cr.status === "merged")
        throw apiError(
          "CR_MERGED",
          `CR #${cr.number} is merged: comment without --to-agent, or open a new CR for more changes`,
        );
      if (body.to_agent) feedbackOf();
      const place = await placeOf(project, cr, body);
      const comment = {
        crId: cr.cr_id,
        kind: "comment" as const,
        authorId: who.userId,
        authorSessionId: who.sessionId,
        body: body.body,
        ...place,
      };
      if (!body.to_agent) return deps.store.create({ ...comment, sessionId: null });
      await requireHeadBranch(project, cr);
      const author = await deps.accounts.user(who.userId);
      const prompt = commentPrompt(cr, {
        author: author?.email ?? "a reviewer",
        body: body.body,
        path: place.path,
        line: place.line,
        headSha: place.headSha,
        excerpt:
          place.headSha && place.path && place.line
            ? await lineExcerpt(project, place.headSha, place.path, place.line)
            : null,
      });
      return toAgent(project, cr, prompt, who.userId, comment);
    },

    /** `svc cr resolve`: the CR's agent merges the base into the head branch, resolves the conflicts and pushes. */
    async resolve(project: Project, ref: string, who: Commenter): Promise<CrComment> {
      if (who.sessionId !== null) throw apiError("SESSION_SCOPE", "a session's token cannot prompt an agent");
      const cr = await crs.get(project, ref);
      if (cr.status !== "open")
        throw apiError("CR_NOT_OPEN", `CR #${cr.number} is ${cr.status}; only an open CR's conflicts are resolved`);
      const preview = await crs.preview(project, cr.cr_id);
      if (preview.conflicts.length === 0) {
        const why =
          preview.merge_base === null
            ? "its branches have unrelated histories, which no conflict resolution joins"
            : `it merges into ${cr.base_ref} without conflicts`;
        throw apiError("NO_CONFLICTS", `nothing to resolve in CR #${cr.number}: ${why}`);
      }
      feedbackOf();
      await requireHeadBranch(project, cr);
      return toAgent(project, cr, resolvePrompt(cr, preview.conflicts), who.userId, {
        crId: cr.cr_id,
        kind: "resolve",
        authorId: who.userId,
        authorSessionId: null,
        body: resolveNote(cr, preview.conflicts),
        path: null,
        line: null,
        headSha: preview.head_sha,
      });
    },
  };
}

export type CommentService = ReturnType<typeof createCommentService>;
