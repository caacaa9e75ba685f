import type { Account, AccountRole } from "../../protocol/account.ts";
import type { Invite, InviteBody, Member } from "../../protocol/member.ts";
import { requireRole } from "../auth/roles.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { apiError } from "../errors.ts";
import type { Invites } from "./invites.ts";

/**
 * Who may change a membership, whatever route or page asks: admins and owners manage members, and only an owner
 * makes, changes or removes an owner (so an admin raises nobody, themselves included, above admin).
 */
export function checkManage(actor: AccountRole, change: { from?: AccountRole; to?: AccountRole }): void {
  requireRole(actor, "admin");
  if (change.from === "owner" || change.to === "owner") requireRole(actor, "owner");
}

type MemberRow = { user_id: string; email: string; name: string; role: AccountRole; created_at: Date };

const toMember = (row: MemberRow): Member => ({
  email: row.email,
  name: row.name,
  role: row.role,
  joined: iso(row.created_at),
});

const MEMBER_COLUMNS = "u.id as user_id, u.email, u.name, m.role, m.created_at";

/**
 * The members of an account: list, invite, change a role, remove. `account` is the caller's membership (its
 * `role` is theirs); every change runs under a lock of the account row, so two changes at once cannot both take
 * away its last owner.
 */
export function createMembers(deps: { sql: Sql; invites: Invites }) {
  const { sql } = deps;

  async function memberOf(tx: Sql, accountId: string, email: string): Promise<MemberRow> {
    const [row] = await tx.query<MemberRow>(
      `select ${MEMBER_COLUMNS} from memberships m join users u on u.id = m.user_id
        where m.account_id = $1 and lower(u.email) = $2`,
      [accountId, email],
    );
    if (!row) throw apiError("MEMBER_NOT_FOUND", `${email} is not a member of this account`);
    return row;
  }

  /** Refuses a change that leaves the account (locked by the caller) without an owner. */
  async function keepAnOwner(tx: Sql, accountId: string, target: MemberRow, what: string): Promise<void> {
    if (target.role !== "owner") return;
    const [count] = await tx.query<{ owners: number }>(
      "select count(*)::int as owners from memberships where account_id = $1 and role = 'owner'",
      [accountId],
    );
    if (count!.owners <= 1)
      throw apiError(
        "LAST_OWNER",
        `${target.email} is the account's last owner: make someone else owner before ${what}`,
      );
  }

  const lockAccount = (tx: Sql, accountId: string) =>
    tx.query("select id from accounts where id = $1 for update", [accountId]);

  return {
    async list(accountId: string): Promise<Member[]> {
      const rows = await sql.query<MemberRow>(
        `select ${MEMBER_COLUMNS} from memberships m join users u on u.id = m.user_id
          where m.account_id = $1 order by m.created_at, u.email`,
        [accountId],
      );
      return rows.map(toMember);
    },

    async invite(account: Account, actorId: string, body: InviteBody): Promise<Invite> {
      checkManage(account.role, { to: body.role });
      const [member] = await sql.query(
        "select 1 from memberships m join users u on u.id = m.user_id where m.account_id = $1 and lower(u.email) = $2",
        [account.id, body.email],
      );
      if (member) throw apiError("ALREADY_MEMBER", `${body.email} is a member of ${account.name} already`);
      const { url, expiresAt } = await deps.invites.create({
        accountId: account.id,
        email: body.email,
        role: body.role,
        createdBy: actorId,
      });
      return { email: body.email, role: body.role, account: account.name, url, expires_at: expiresAt };
    },

    changeRole(account: Account, email: string, role: AccountRole): Promise<Member> {
      return sql.transaction(async (tx) => {
        await lockAccount(tx, account.id);
        const target = await memberOf(tx, account.id, email);
        checkManage(account.role, { from: target.role, to: role });
        if (role !== "owner") await keepAnOwner(tx, account.id, target, "changing their role");
        await tx.query("update memberships set role = $3 where account_id = $1 and user_id = $2", [
          account.id,
          target.user_id,
          role,
        ]);
        return toMember({ ...target, role });
      });
    },

    remove(account: Account, email: string): Promise<void> {
      return sql.transaction(async (tx) => {
        await lockAccount(tx, account.id);
        const target = await memberOf(tx, account.id, email);
        checkManage(account.role, { from: target.role });
        await keepAnOwner(tx, account.id, target, "removing them");
        await tx.query("delete from memberships where account_id = $1 and user_id = $2", [account.id, target.user_id]);
      });
    },
  };
}

export type Members = ReturnType<typeof createMembers>;
