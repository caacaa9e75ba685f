import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import { verifyPassword } from "./passwords.ts";
import type { SignInLimiter } from "./rate-limit.ts";

/** What an email stands for here: nobody yet, a user with a password, or a user who signs in otherwise. */
export type UserState =
  | { kind: "none" }
  | { kind: "password"; userId: string }
  | { kind: "no-password"; userId: string };

/**
 * Email and password sign-in (the dashboard's form, an invite's page, `svc login --email`). One answer for a wrong
 * email and a wrong password alike, after the same work, and at most SIGN_IN_TRIES_PER_MINUTE tries a minute per
 * email and per client address.
 */
export function createPasswordSignIn(deps: { sql: Sql; limiter: SignInLimiter }) {
  const user = async (email: string) => {
    const [row] = await deps.sql.query<{ id: string; password_hash: string | null }>(
      "select id, password_hash from users where lower(email) = $1",
      [email],
    );
    return row;
  };
  return {
    async userState(email: string): Promise<UserState> {
      const row = await user(email);
      if (!row) return { kind: "none" };
      return { kind: row.password_hash ? "password" : "no-password", userId: row.id };
    },

    /** The user `email` and `password` sign in (`address`: the client's, for the limit); else 401, or 429. */
    async userId(email: string, password: string, address: string): Promise<string> {
      await deps.limiter.admit(email, address);
      const row = await user(email);
      if (!(await verifyPassword(password, row?.password_hash)) || !row)
        throw apiError("UNAUTHENTICATED", "wrong email or password");
      return row.id;
    },
  };
}

export type PasswordSignIn = ReturnType<typeof createPasswordSignIn>;
