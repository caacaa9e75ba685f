import { hashSecret, newSecret } from "../../protocol/credential.ts";
import type { Sql } from "../db/sql.ts";

/** Long enough to type a password at the provider, short enough that a handle left in a cookie soon means nothing. */
export const SSO_SIGN_IN_TTL_MS = 10 * 60_000;

const HANDLE_PREFIX = "svc_sso_";

/** What the callback checks the provider's answer against, and where the browser goes once signed in. */
export type PendingSignIn = { state: string; nonce: string; codeVerifier: string; next: string };

/**
 * Sign-ins between the redirect to the provider and its redirect back. The browser that began one holds its handle
 * (a cookie); the database holds the handle's hash with the checks, so the state, nonce and verifier never leave the
 * server, every API replica finds them, and taking one deletes it: a callback counts once.
 */
export function createSsoSignIns(sql: Sql) {
  return {
    /** Records a sign-in under way; the handle goes into the browser's cookie. */
    async begin(pending: PendingSignIn): Promise<string> {
      const handle = newSecret(HANDLE_PREFIX);
      await sql.query(
        `insert into sso_sign_ins (handle_hash, state, nonce, code_verifier, next, expires_at)
         values ($1, $2, $3, $4, $5, $6)`,
        [
          hashSecret(handle),
          pending.state,
          pending.nonce,
          pending.codeVerifier,
          pending.next,
          new Date(Date.now() + SSO_SIGN_IN_TTL_MS),
        ],
      );
      // Abandoned sign-ins are useless: sweep them on the way.
      await sql.query("delete from sso_sign_ins where expires_at < now()");
      return handle;
    },

    /** The sign-in a handle names, consumed: a second take, or one past its expiry, finds nothing. */
    async take(handle: string): Promise<PendingSignIn | undefined> {
      if (!handle.startsWith(HANDLE_PREFIX)) return undefined;
      const [row] = await sql.query<{
        state: string;
        nonce: string;
        code_verifier: string;
        next: string;
        live: boolean;
      }>(
        "delete from sso_sign_ins where handle_hash = $1 returning state, nonce, code_verifier, next, expires_at > now() as live",
        [hashSecret(handle)],
      );
      return row?.live
        ? { state: row.state, nonce: row.nonce, codeVerifier: row.code_verifier, next: row.next }
        : undefined;
    },
  };
}

export type SsoSignIns = ReturnType<typeof createSsoSignIns>;
