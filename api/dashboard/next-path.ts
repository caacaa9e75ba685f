import { isSafeName } from "../../protocol/text.ts";

const BASE = "http://dashboard.invalid";

/**
 * Where a sign-in may land: a path of this origin's dashboard, normalized (`/dashboard/../v1` is not one), never
 * another origin (`//evil`, `/\evil`) nor anything with a control character. Undefined when `next` is not one.
 */
export function dashboardPath(next: string): string | undefined {
  if (!next.startsWith("/dashboard") || next.includes("\\") || !isSafeName(next)) return undefined;
  let url: URL;
  try {
    url = new URL(next, BASE);
  } catch {
    return undefined;
  }
  if (url.origin !== BASE) return undefined;
  if (url.pathname !== "/dashboard" && !url.pathname.startsWith("/dashboard/")) return undefined;
  return url.pathname + url.search;
}
