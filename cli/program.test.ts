import { describe, expect, it } from "vitest";
import { COMMANDS, commandWord } from "./program.ts";

describe("the lazily loaded command table", () => {
  it("selects each command by exactly the names and aliases the loaded command answers to", async () => {
    for (const entry of COMMANDS) {
      const loaded = (await entry.load()).flatMap((c) => [c.name(), ...c.aliases()]);
      expect(loaded.sort()).toEqual([...entry.words].sort());
    }
  });

  it("finds the command word after root options and their values", () => {
    expect(commandWord(["--host", "selfhost", "--verbose", "sessions", "ls"])).toBe("sessions");
    expect(commandWord(["-v"])).toBeUndefined();
    expect(commandWord(["cr", "--host", "x"])).toBe("cr");
  });
});
