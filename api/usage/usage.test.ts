import { describe, expect, it } from "vitest";
import { usageByDay, usageWindow } from "./usage.ts";

const at = (iso: string) => new Date(iso);
const web = { project_id: "11111111-1111-4111-8111-111111111111", project: "web" };

describe("usage per project per UTC day", () => {
  it("cuts a sandbox's life at midnight and at the window's edges, rounding each day's seconds", () => {
    const window = usageWindow({ from: "2024-03-02", to: "2024-03-03" }, at("2024-06-01T00:00:00Z"));
    const usage = usageByDay(
      window,
      [
        // 23:00 on the 1st (before the window) to 00:30:00.4 on the 3rd.
        { ...web, purpose: "agent", started: at("2024-03-01T23:00:00Z"), ended: at("2024-03-03T00:30:00.400Z") },
        { ...web, purpose: "check", started: at("2024-03-03T23:59:30Z"), ended: at("2024-03-04T00:10:00Z") },
      ],
      [
        { ...web, purpose: "agent", created: at("2024-03-01T22:59:00Z") },
        { ...web, purpose: "check", created: at("2024-03-03T23:59:29Z") },
      ],
    );
    expect(usage).toEqual({
      from: "2024-03-02",
      to: "2024-03-03",
      days: [
        {
          date: "2024-03-02",
          ...web,
          sessions: 0,
          sandbox_seconds: 86_400,
          check_sessions: 0,
          check_sandbox_seconds: 0,
        },
        {
          date: "2024-03-03",
          ...web,
          sessions: 0,
          sandbox_seconds: 1800,
          check_sessions: 1,
          check_sandbox_seconds: 30,
        },
      ],
      totals: { sessions: 0, sandbox_seconds: 88_200, check_sessions: 1, check_sandbox_seconds: 30 },
    });
  });

  it("defaults to the 30 days up to today and refuses more than 366", () => {
    expect(usageWindow({}, at("2024-03-31T18:00:00Z"))).toMatchObject({ from: "2024-03-02", to: "2024-03-31" });
    expect(usageWindow({ to: "2024-01-31" }, at("2024-03-31T18:00:00Z"))).toMatchObject({ from: "2024-01-02" });
    expect(usageWindow({ from: "2024-01-01", to: "2024-12-31" }, new Date()).end).toEqual(at("2025-01-01T00:00:00Z"));
    expect(usageWindow({ from: "2023-01-01", to: "2024-01-01" }, new Date()).from).toBe("2023-01-01");
    expect(() => usageWindow({ from: "2023-01-01", to: "2024-01-02" }, new Date())).toThrow(/at most 366 days/);
  });
});
