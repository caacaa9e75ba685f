import { describe, expect, it } from "vitest";
import { whileLeading } from "./cluster.ts";

describe("whileLeading", () => {
  it("starts on gaining the lead, ticks while holding it, stops on losing it, and logs a failed step", async () => {
    const answers = [false, true, true, false, false, true];
    const steps: string[] = [];
    const logged: string[] = [];
    const check = whileLeading({
      lead: async () => {
        const leads = answers.shift();
        if (leads === undefined) throw new Error("database gone");
        return leads;
      },
      name: "work",
      log: (msg) => logged.push(msg),
      start: async () => void steps.push("start"),
      tick: async () => {
        steps.push("tick");
        throw new Error("boom");
      },
      stop: () => void steps.push("stop"),
    });
    for (let i = 0; i < 7; i++) await check();
    expect(steps).toEqual(["start", "tick", "stop", "start", "stop"]);
    expect(logged).toEqual(["work failed"]);
  });

  it("ticks on gaining the lead when the work has no start", async () => {
    let ticks = 0;
    const check = whileLeading({ lead: async () => true, name: "work", log: () => {}, tick: async () => ticks++ });
    await check();
    await check();
    expect(ticks).toBe(2);
  });
});
