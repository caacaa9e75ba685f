import { z } from "zod";

/**
 * What characters text from a client may carry. Two kinds, checked at the edge by every body schema:
 * - a name (names, titles, slugs, branch names, ids, agent and model names, metadata keys, path parameters) is
 *   one line: no C0 control character at all (NUL to US, tab and newlines included) and no DEL;
 * - text (descriptions, merge messages, prompts, metadata string values, secret and environment values) may span
 *   lines: tab, LF and CR are its only C0 characters, and never NUL.
 * Both refuse lone UTF-16 surrogates: PostgreSQL cannot store them (text, or jsonb's `\ud800` escapes), and a
 * NUL breaks text columns, jsonb and the environment of a sandbox alike.
 */
function scan(s: string, multiLine: boolean): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) {
      if (multiLine && (c === 0x09 || c === 0x0a || c === 0x0d)) continue;
      return false;
    }
    if (c === 0x7f && !multiLine) return false;
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = s.charCodeAt(i + 1);
      if (c > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    }
  }
  return true;
}

/** A one-line value: no control character, no lone surrogate. */
export const isSafeName = (s: string) => scan(s, false);

/** Multi-line text: no NUL, no C0 control character but tab, LF and CR, no lone surrogate. */
export const isSafeText = (s: string) => scan(s, true);

export const NAME_RULE = "must not contain control characters or unpaired surrogates";
export const TEXT_RULE = "must not contain NUL, control characters other than tab and newlines, or unpaired surrogates";

/** A string holding a name (one line). Chain length checks after it: `SafeName.trim().min(1).max(200)`. */
export const SafeName = z.string().refine(isSafeName, NAME_RULE);

/** `s` matched literally inside a regular expression. */
export const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A string holding text (may span lines). */
export const SafeText = z.string().refine(isSafeText, TEXT_RULE);

const MAX_METADATA_DEPTH = 16;
const MAX_METADATA_KEY = 200;

/** The first value of a JSON document that breaks the rules, as a path from its root and a reason. */
function jsonProblem(root: unknown): { path: PropertyKey[]; message: string } | undefined {
  const stack: { value: unknown; path: PropertyKey[] }[] = [{ value: root, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === "string") {
      if (!isSafeText(value)) return { path, message: TEXT_RULE };
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (path.length >= MAX_METADATA_DEPTH) return { path, message: `nested deeper than ${MAX_METADATA_DEPTH} levels` };
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value);
    for (const [key, child] of entries) {
      if (typeof key === "string" && (!isSafeName(key) || key.length > MAX_METADATA_KEY)) {
        return { path, message: `keys ${NAME_RULE} and have at most ${MAX_METADATA_KEY} characters` };
      }
      stack.push({ value: child, path: [...path, key] });
    }
  }
  return undefined;
}

/**
 * Free-form JSON attached to a resource (a CR's `metadata`): an object whose keys, at every depth, are names and
 * whose string values are text, nested at most 16 levels.
 */
export const Metadata = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
  const problem = jsonProblem(value);
  if (problem) ctx.addIssue({ code: "custom", path: problem.path, message: problem.message });
});
