import { describe, expect, it } from "vitest";
import { AccountRole } from "../../protocol/account.ts";
import { ApiError } from "../errors.ts";
import { checkManage } from "./members.ts";

const refusal = (fn: () => void) => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof ApiError ? `${err.status} ${err.code}` : String(err);
  }
};

describe("checkManage: who may change whose membership", () => {
  it("members and viewers manage nobody", () => {
    for (const actor of ["member", "viewer"] as const)
      for (const to of AccountRole.options)
        expect(refusal(() => checkManage(actor, { to }))).toBe("403 FORBIDDEN_ROLE");
  });

  it("an admin invites, changes and removes admins, members and viewers, never an owner", () => {
    for (const role of ["admin", "member", "viewer"] as const) {
      expect(refusal(() => checkManage("admin", { to: role }))).toBeUndefined();
      expect(refusal(() => checkManage("admin", { from: role }))).toBeUndefined();
      expect(refusal(() => checkManage("admin", { from: role, to: "member" }))).toBeUndefined();
    }
    expect(refusal(() => checkManage("admin", { to: "owner" }))).toBe("403 FORBIDDEN_ROLE");
    expect(refusal(() => checkManage("admin", { from: "member", to: "owner" }))).toBe("403 FORBIDDEN_ROLE");
    expect(refusal(() => checkManage("admin", { from: "owner", to: "admin" }))).toBe("403 FORBIDDEN_ROLE");
    expect(refusal(() => checkManage("admin", { from: "owner" }))).toBe("403 FORBIDDEN_ROLE");
  });

  it("an owner may do all of it", () => {
    for (const from of AccountRole.options)
      for (const to of AccountRole.options) expect(refusal(() => checkManage("owner", { from, to }))).toBeUndefined();
  });
});
