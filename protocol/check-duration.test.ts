import { describe, expect, it } from "vitest";
import { checkDuration } from "./check-duration.ts";

const at = (s: number) => new Date(Date.UTC(2025, 0, 1) + s * 1000).toISOString();

describe("checkDuration", () => {
  it("is '-' for a queued check, and the time so far for a running one", () => {
    expect(checkDuration({ started_at: null, finished_at: null })).toBe("-");
    expect(checkDuration({ started_at: at(0), finished_at: null }, Date.parse(at(7)))).toBe("7s");
  });

  it("reads as seconds, minutes and seconds, then hours and minutes", () => {
    const ran = (s: number) => checkDuration({ started_at: at(0), finished_at: at(s) });
    expect(ran(0)).toBe("0s");
    expect(ran(59)).toBe("59s");
    expect(ran(65)).toBe("1m05s");
    expect(ran(3599)).toBe("59m59s");
    expect(ran(3720)).toBe("1h02m");
  });

  it("never goes negative when clocks disagree", () => {
    expect(checkDuration({ started_at: at(10), finished_at: at(5) })).toBe("0s");
  });
});
