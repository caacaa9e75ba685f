import { createHmac, timingSafeEqual } from "node:crypto";
import { hashSecret, newSecret } from "../../protocol/credential.ts";
import type { Sql } from "../db/sql.ts";

/** A sign-in link is opened right after the CLI prints it: two minutes, once. */
export const SIGN_IN_CODE_TTL_MS = 2 * 60_000;
/** A browser stays signed in for a working week; signing out ends it at once. */
export const BROWSER_SESSION_TTL_MS = 7 * 24 * 60 * 60_000;

const CODE_PREFIX = "svc_dsc_";
const SESSION_PREFIX = "svc_dss_";

export type BrowserSession = { id: string; userId: string; csrf: string };

/**
 * The CSRF token of a browser session: derived from the cookie's secret, so it is bound to that session, needs no
 * storage, and a page of another session (or another user) cannot supply it.
 */
export function csrfToken(sessionSecret: string): string {
  return createHmac("sha256", sessionSecret).update("svc dashboard csrf").digest("base64url");
}

export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function createBrowserSessions(sql: Sql) {
  return {
    /** A one-time code for `userId`: what a sign-in link carries. */
    async mintCode(userId: string): Promise<string> {
      const code = newSecret(CODE_PREFIX);
      await sql.query("insert into dashboard_sign_in_codes (code_hash, user_id, expires_at) values ($1, $2, $3)", [
        hashSecret(code),
        userId,
        new Date(Date.now() + SIGN_IN_CODE_TTL_MS),
      ]);
      // Expired codes are useless: sweep them on the way.
      await sql.query("delete from dashboard_sign_in_codes where expires_at < now()");
      return code;
    },

    /** The user a code signs in, consuming it: a second use, or one past its expiry, finds nothing. */
    async redeemCode(code: string): Promise<string | undefined> {
      const [row] = await sql.query<{ user_id: string; live: boolean }>(
        "delete from dashboard_sign_in_codes where code_hash = $1 returning user_id, expires_at > now() as live",
        [hashSecret(code)],
      );
      return row?.live ? row.user_id : undefined;
    },

    /** A new browser session: the secret goes into the cookie, only its hash into the database. */
    async open(userId: string): Promise<{ secret: string; expiresAt: Date }> {
      const secret = newSecret(SESSION_PREFIX);
      const expiresAt = new Date(Date.now() + BROWSER_SESSION_TTL_MS);
      await sql.query("insert into dashboard_sessions (token_hash, user_id, expires_at) values ($1, $2, $3)", [
        hashSecret(secret),
        userId,
        expiresAt,
      ]);
      await sql.query("delete from dashboard_sessions where expires_at < now()");
      return { secret, expiresAt };
    },

    async lookup(secret: string): Promise<BrowserSession | undefined> {
      if (!secret.startsWith(SESSION_PREFIX)) return undefined;
      const [row] = await sql.query<{ id: string; user_id: string }>(
        "select id, user_id from dashboard_sessions where token_hash = $1 and expires_at > now()",
        [hashSecret(secret)],
      );
      return row && { id: row.id, userId: row.user_id, csrf: csrfToken(secret) };
    },

    async end(sessionId: string): Promise<void> {
      await sql.query("delete from dashboard_sessions where id = $1", [sessionId]);
    },
  };
}

export type BrowserSessions = ReturnType<typeof createBrowserSessions>;
