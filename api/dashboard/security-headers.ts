/**
 * No script or style from anywhere but this origin, no inline ones, never inside a frame. `formTarget`: the one
 * other origin a page's form may end at (the CLI's loopback callback of `svc login`).
 */
export function contentSecurityPolicy(formTarget?: string): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    `form-action 'self'${formTarget ? ` ${formTarget}` : ""}`,
    "frame-ancestors 'none'",
  ].join("; ");
}

/** Every dashboard answer carries these (a route may set its own first); pages are private, never cached. */
export const SECURITY_HEADERS = {
  "content-security-policy": contentSecurityPolicy(),
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
};
