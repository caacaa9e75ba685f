/** Markup already escaped (or written by us): the only value `html` interpolates as is. */
export type Html = { readonly __html: string };

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Trusted markup, by name: for fixed strings of our own, never for anything a user or a repository wrote. */
export const raw = (markup: string): Html => ({ __html: markup });

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return "";
  if (Array.isArray(value)) return value.map(render).join("");
  if (typeof value === "object") return (value as Html).__html;
  return escapeHtml(String(value));
}

/**
 * Markup with every interpolation escaped, unless it is itself `Html` (a nested `html` or `raw`). Arrays are
 * joined; null, undefined and false render nothing, so `${cond && html`…`}` works.
 */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return raw(out);
}
