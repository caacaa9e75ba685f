import { describe, expect, it } from "vitest";
import { crLabel, parseCrRef } from "./cr-ref.ts";

describe("a <cr> argument", () => {
  const id = "0b9f6c1e-3a55-4c3e-9d55-2f0f4a1c9b10";

  it("is a number (3 or #3) or an id, and is printed as other commands print a CR", () => {
    expect(crLabel(parseCrRef("3"))).toBe("#3");
    expect(crLabel(parseCrRef("#3"))).toBe("#3");
    expect(crLabel(parseCrRef(id.toUpperCase()))).toBe(id);
  });

  it("anything else is a usage error naming both forms", () => {
    for (const bad of ["0", "#", "x3", "3.5", "#-1"])
      expect(() => parseCrRef(bad)).toThrow("use its number (3 or #3) or its id");
  });
});
