import { hashSecret } from "../../protocol/credential.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";

/** Password tries allowed in a minute, per email and per client address. */
export const SIGN_IN_TRIES_PER_MINUTE = 10;

/**
 * The sign-in limit (password forms, `POST /v1/auth/password`), in the database so every API process of a stack
 * counts the same tries. A try is recorded first and counted after, so tries racing each other cannot all slip
 * under the limit; a refused one is taken back, so waiting out the minute is enough. The 429 says nothing about
 * which of the two limits was reached, nor whether the email exists.
 */
export function createSignInLimiter(sql: Sql) {
  return {
    async admit(email: string, address: string): Promise<void> {
      const keys = [hashSecret(`email:${email}`), hashSecret(`address:${address}`)];
      await sql.query("delete from sign_in_attempts where at < now() - interval '1 minute'");
      const mine = await sql.query<{ id: string }>(
        "insert into sign_in_attempts (key_hash) values ($1), ($2) returning id",
        keys,
      );
      const counts = await sql.query<{ tries: number }>(
        `select count(*)::int as tries from sign_in_attempts
          where key_hash = any($1::text[]) and at > now() - interval '1 minute' group by key_hash`,
        [keys],
      );
      if (counts.every((c) => c.tries <= SIGN_IN_TRIES_PER_MINUTE)) return;
      await sql.query("delete from sign_in_attempts where id = any($1::uuid[])", [mine.map((m) => m.id)]);
      throw apiError("RATE_LIMITED", "too many sign-in attempts: wait a minute and try again");
    },
  };
}

export type SignInLimiter = ReturnType<typeof createSignInLimiter>;
