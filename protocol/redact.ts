import { escapeRegExp } from "./text.ts";

/** What a redacted value is replaced with. */
export const REDACTED = "***";

/** Shorter values are left alone: masking them would mask half of any message and hide next to nothing. */
export const MIN_REDACTED_LENGTH = 4;

/**
 * Values shorter than this are masked only where they stand alone, not inside a longer word: a placeholder key
 * such as `none` or `test` would otherwise turn `nonexistent` into `***xistent`, while a value this short found
 * inside another word is a coincidence far more often than a leak.
 */
export const WORD_BOUNDED_BELOW = 12;

const GO_ESCAPES: Record<number, string> = { 7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r" };

/** A value as Go's `%q` prints it (Docker's and containerd's error messages quote their input this way). */
function goQuoted(value: string): string {
  let out = "";
  for (const ch of value) {
    const c = ch.charCodeAt(0);
    if (ch === "\\" || ch === '"') out += `\\${ch}`;
    else if (c < 0x20 || c === 0x7f) out += GO_ESCAPES[c] ?? `\\x${c.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out;
}

/** Credentials embedded in a URL (`scheme://user:secret@host`) become `scheme://***@host`. */
export function redactUrlCredentials(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, `$1${REDACTED}@`);
}

/**
 * `text` without any of `secrets` in it, nor credentials embedded in a URL: for messages of Docker, git or a
 * sandbox that may quote the environment or arguments they were given, before such a message is stored (a
 * session's or sandbox's `error`), logged or answered. Each secret is also found as JSON and Go quote it (a NUL as
 * `\u0000` or `\x00`) and, when it spans lines, line by line. Values shorter than MIN_REDACTED_LENGTH are ignored,
 * and those shorter than WORD_BOUNDED_BELOW are masked only as words of their own.
 */
export function redact(text: string, secrets: Iterable<string | null | undefined> = []): string {
  const needles = new Set<string>();
  for (const secret of secrets) {
    if (!secret) continue;
    for (const form of [secret, JSON.stringify(secret).slice(1, -1), goQuoted(secret), ...secret.split(/\r?\n|\r/)]) {
      if (form.length >= MIN_REDACTED_LENGTH) needles.add(form);
    }
  }
  let out = text;
  // Longest first, so a secret that contains another is masked whole.
  for (const needle of [...needles].sort((a, b) => b.length - a.length)) {
    out =
      needle.length >= WORD_BOUNDED_BELOW
        ? out.split(needle).join(REDACTED)
        : out.replace(new RegExp(`(?<![A-Za-z0-9_])${escapeRegExp(needle)}(?![A-Za-z0-9_])`, "g"), REDACTED);
  }
  return redactUrlCredentials(out);
}
