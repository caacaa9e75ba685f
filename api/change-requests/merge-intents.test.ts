import { describe, expect, it } from "vitest";
import { intentVerdict } from "./merge-intents.ts";

describe("what the repair does with a merge's intent", () => {
  it("records the merge when the base branch holds the target, drops the intent when it does not", () => {
    expect(intentVerdict({ ownerMayBeMerging: false, base: { holdsTarget: true } })).toBe("record");
    expect(intentVerdict({ ownerMayBeMerging: false, base: { holdsTarget: false } })).toBe("drop");
  });

  it("drops the intent of a base branch that is gone: nothing shows the merge happened", () => {
    expect(intentVerdict({ ownerMayBeMerging: false, base: "missing" })).toBe("drop");
  });

  it("waits while the owner may still be merging, whatever the branch says, and while the branch cannot be read", () => {
    expect(intentVerdict({ ownerMayBeMerging: true, base: { holdsTarget: true } })).toBe("wait");
    expect(intentVerdict({ ownerMayBeMerging: true, base: { holdsTarget: false } })).toBe("wait");
    expect(intentVerdict({ ownerMayBeMerging: true, base: "missing" })).toBe("wait");
    expect(intentVerdict({ ownerMayBeMerging: false, base: "unreadable" })).toBe("wait");
  });
});
