import { describe, expect, it } from "vitest";
import { AUDITED, bodyId, fieldNames } from "./actions.ts";

const rule = (key: string) => AUDITED[key]!;
const actionOf = (key: string, body: Record<string, unknown>) => {
  const action = rule(key).action;
  return typeof action === "string" ? action : action(body);
};

describe("what an audit entry keeps of a request", () => {
  it("keeps secret names, never their values", () => {
    const value = "hunter2-the-value";
    const set = rule("PUT /v1/projects/:projectId/secrets").names!({ secrets: { B_KEY: value, A_KEY: value } });
    expect(set).toEqual({ names: ["A_KEY", "B_KEY"] });
    const unset = rule("DELETE /v1/projects/:projectId/secrets").names!({ names: ["OLD", "not a name: x=1"] });
    expect(unset).toEqual({ names: ["OLD"] });
    expect(JSON.stringify([set, unset, fieldNames({ secrets: { A_KEY: value } })])).not.toContain(value);
  });

  it("keeps a body's field names, not the dashboard's CSRF token", () => {
    expect(fieldNames({ message: "m", head_sha: "abc", _csrf: "t" })).toEqual(["head_sha", "message"]);
  });

  it("keeps a member's email and role only when they are an email and a role", () => {
    const invite = "POST /v1/accounts/members/invites";
    expect(rule(invite).names!({ email: "a@b.test", role: "admin" })).toEqual({ role: "admin" });
    expect(rule(invite).names!({ role: "password123" })).toEqual({});
    expect(bodyId({ email: "Ann@B.test" }, "email")).toBe("ann@b.test");
    expect(bodyId({ email: "not an email" }, "email")).toBeNull();
  });

  it("tells a merge from queueing one, by the flag alone", () => {
    const rest = "POST /v1/projects/:projectId/change-requests/:crId/merge";
    expect(actionOf(rest, { head_sha: "abc" })).toBe("cr.merge");
    expect(actionOf(rest, { auto: true })).toBe("cr.auto_merge.on");
    expect(actionOf(rest, { auto: false })).toBe("cr.auto_merge.off");
    const form = "POST /dashboard/projects/:projectId/crs/:crId/auto-merge";
    expect(actionOf(form, { on: "1" })).toBe("cr.auto_merge.on");
    expect(actionOf(form, { on: "0" })).toBe("cr.auto_merge.off");
  });
});
