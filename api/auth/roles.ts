import type { AccountRole } from "../../protocol/account.ts";
import { apiError } from "../errors.ts";

/** Lowest first: each role may do all that the ones before it may. */
const ORDER: readonly AccountRole[] = ["viewer", "member", "admin", "owner"];

export const atLeast = (role: AccountRole, least: AccountRole) => ORDER.indexOf(role) >= ORDER.indexOf(least);

/** A member's role against what an act takes: 403 FORBIDDEN_ROLE naming both. */
export function requireRole(role: AccountRole, least: AccountRole): void {
  if (atLeast(role, least)) return;
  throw apiError("FORBIDDEN_ROLE", `this takes the ${least} role or above in this account; yours is ${role}`, {
    role,
    required_role: least,
  });
}
