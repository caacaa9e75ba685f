import type { Account, AccountRole, Me, User } from "../../protocol/account.ts";
import type { Sql } from "../db/sql.ts";
import { createTtlCache } from "../ttl-cache.ts";

type MembershipRow = { id: string; name: string; slug: string; role: Account["role"] };

const MEMBERSHIP_TTL_MS = 5000;

export function createAccountStore(sql: Sql) {
  const memberships = createTtlCache<string, AccountRole | undefined>(MEMBERSHIP_TTL_MS);
  const store = {
    async user(id: string): Promise<User | undefined> {
      const [row] = await sql.query<User>("select id, email, name from users where id = $1", [id]);
      return row;
    },

    /** The user's accounts, oldest membership first: the first is the active account. */
    async accounts(userId: string): Promise<Account[]> {
      return sql.query<MembershipRow>(
        `select a.id, a.name, a.slug, m.role from memberships m join accounts a on a.id = m.account_id
         where m.user_id = $1 order by m.created_at, a.slug`,
        [userId],
      );
    },

    /** The user's role in the account; undefined when they are no member of it. */
    role(userId: string, accountId: string): Promise<AccountRole | undefined> {
      return memberships.get(`${userId}:${accountId}`, async () => {
        const [row] = await sql.query<{ role: AccountRole }>(
          "select role from memberships where user_id = $1 and account_id = $2",
          [userId, accountId],
        );
        return row?.role;
      });
    },

    async me(userId: string): Promise<Me | undefined> {
      const user = await store.user(userId);
      const accounts = await store.accounts(userId);
      if (!user || !accounts[0]) return undefined;
      return { user, account: accounts[0], accounts };
    },

    /** Creates a user with their own account (owner). Used by the self-host bootstrap and by tests. */
    async createUserWithAccount(input: { email: string; name: string; accountSlug: string; isAdmin?: boolean }) {
      return sql.transaction(async (tx) => {
        const [user] = await tx.query<{ id: string }>(
          "insert into users (email, name, is_admin) values ($1, $2, $3) returning id",
          [input.email, input.name, input.isAdmin ?? false],
        );
        const [account] = await tx.query<{ id: string }>(
          "insert into accounts (name, slug) values ($1, $2) returning id",
          [input.name, input.accountSlug],
        );
        await tx.query("insert into memberships (account_id, user_id, role) values ($1, $2, 'owner')", [
          account!.id,
          user!.id,
        ]);
        return { userId: user!.id, accountId: account!.id };
      });
    },

    async findUserByEmail(email: string): Promise<{ id: string } | undefined> {
      const [row] = await sql.query<{ id: string }>("select id from users where email = $1", [email]);
      return row;
    },
  };
  return store;
}

export type AccountStore = ReturnType<typeof createAccountStore>;
