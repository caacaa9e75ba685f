import type { ChangeRequest } from "../../protocol/change-request.ts";

/** Lines shown either side of a commented line: enough for the agent to find the place, not a copy of the file. */
export const EXCERPT_CONTEXT = 3;
const EXCERPT_WIDTH = 300;

type CrFacts = Pick<ChangeRequest, "number" | "title" | "head_ref" | "base_ref">;

/** Lines `line - EXCERPT_CONTEXT` to `line + EXCERPT_CONTEXT` of `content`, numbered, the commented one marked. */
export function excerpt(content: string, line: number): string {
  const lines = content.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const from = Math.max(1, line - EXCERPT_CONTEXT);
  const to = Math.min(lines.length, line + EXCERPT_CONTEXT);
  const width = String(to).length;
  const shown: string[] = [];
  for (let n = from; n <= to; n++) {
    const text = lines[n - 1]!;
    const cut = text.length > EXCERPT_WIDTH ? `${text.slice(0, EXCERPT_WIDTH)}…` : text;
    shown.push(`${n === line ? ">" : " "} ${String(n).padStart(width)} | ${cut}`);
  }
  return shown.join("\n");
}

/** The same CR updates only if the agent's commits land on its head branch: said in every prompt. */
const pushBack = (cr: CrFacts) =>
  `Commit on your branch ${cr.head_ref} and push to that same branch (git push origin HEAD), so CR #${cr.number} ` +
  "updates. Do not open a new CR, do not force-push.";

export type CommentFacts = {
  author: string;
  body: string;
  path: string | null;
  line: number | null;
  headSha: string | null;
  /** `excerpt` of the file at `headSha` around `line`; null without a line, or when the file could not be read. */
  excerpt: string | null;
};

/** A review comment as the CR's agent reads it: which CR, where in which file, what was said, and where to push. */
export function commentPrompt(cr: CrFacts, comment: CommentFacts): string {
  const parts = [`A review comment on CR #${cr.number} "${cr.title}" from ${comment.author}, for you to address.`];
  if (comment.path) {
    const at = comment.headSha ? ` (at commit ${comment.headSha.slice(0, 12)})` : "";
    const where = comment.line ? `${comment.path}, line ${comment.line}` : comment.path;
    parts.push(`File: ${where}${at}${comment.excerpt ? `:\n${comment.excerpt}` : ""}`);
  }
  parts.push(`Comment:\n${comment.body}`, pushBack(cr));
  return parts.join("\n\n");
}

/** `svc cr resolve`: merge the base into the head branch, resolve what conflicts, push. */
export function resolvePrompt(cr: CrFacts, conflicts: string[]): string {
  return [
    `CR #${cr.number} "${cr.title}" cannot merge: your branch ${cr.head_ref} conflicts with ${cr.base_ref} in:\n` +
      conflicts.map((path) => `- ${path}`).join("\n"),
    `Merge the base branch into your branch and resolve the conflicts: git fetch origin ${cr.base_ref} && git merge ` +
      `origin/${cr.base_ref}, fix each conflicted file keeping what both sides meant, and commit the merge. Do not ` +
      `rebase. Then check with 'svc cr show ${cr.number}' that it merges cleanly.`,
    pushBack(cr),
  ].join("\n\n");
}

/** The line a resolve request is listed with among the CR's comments. */
export const resolveNote = (cr: CrFacts, conflicts: string[]) =>
  `Asked the agent to merge ${cr.base_ref} into ${cr.head_ref} and resolve the conflicts in ${conflicts.join(", ")}.`;
