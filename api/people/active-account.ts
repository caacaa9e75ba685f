import type { IncomingHttpHeaders } from "node:http";
import { ACCOUNT_HEADER, type Account } from "../../protocol/account.ts";
import type { AccountStore } from "../accounts/store.ts";
import { apiError } from "../errors.ts";

/** The account a request's ACCOUNT_HEADER names (slug or id), if any: what `svc accounts use` chose. */
export function namedAccount(req: { headers: IncomingHttpHeaders }): string | undefined {
  const value = req.headers[ACCOUNT_HEADER];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * The account a person's account routes and pages act on (their active one), with their role in it: the one
 * `named` names by slug or id (namedAccount: `svc accounts use`), else their first.
 */
export async function activeAccount(accounts: AccountStore, userId: string, named?: string): Promise<Account> {
  const mine = await accounts.accounts(userId);
  if (named === undefined) {
    if (!mine[0]) throw apiError("NOT_FOUND", "this user has no account");
    return mine[0];
  }
  const account = mine.find((a) => a.slug === named || a.id === named.toLowerCase());
  if (!account)
    throw apiError(
      "NOT_A_MEMBER",
      `you are not a member of an account '${named.slice(0, 100)}'; 'svc accounts ls' lists yours, 'svc accounts use <slug>' picks one`,
    );
  return account;
}
