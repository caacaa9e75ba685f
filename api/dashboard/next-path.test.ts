import { describe, expect, it } from "vitest";
import { dashboardPath } from "./next-path.ts";

describe("dashboardPath: where a sign-in may land", () => {
  it("keeps dashboard paths of this origin, normalized", () => {
    expect(dashboardPath("/dashboard")).toBe("/dashboard");
    expect(dashboardPath("/dashboard/projects/x?tab=crs")).toBe("/dashboard/projects/x?tab=crs");
    expect(dashboardPath("/dashboard/a/../b")).toBe("/dashboard/b");
  });

  it("refuses other origins, other paths and control characters", () => {
    for (const bad of [
      "//evil.example/dashboard",
      "/dashboard/../v1/projects",
      "/dashboardx",
      "/\\evil.example",
      "/dashboard\\..\\v1",
      "https://evil.example/dashboard",
      "/dashboard/\nx",
      "/v1/dashboard",
    ])
      expect(dashboardPath(bad), bad).toBeUndefined();
  });
});
